"""Supervision of the pool's processes: a warm worker and its control channel (`WorkerProc`), one
session process as the pool sees it (`SessionProc`), and why a session process ended, in words
(`describe_exit`). The pool's RPC (opening sessions, calls, results) lives in pool.py; what the
pool accepts on a session's channel, in frames.py.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import select
import signal
import socket
import subprocess
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from .config import SandboxConfig
from .inside import wire
from .launch import WorkerCommand
from .protocol import ErrorKind

logger = logging.getLogger("astra_foundation.sandbox")

WORKER_START_TIMEOUT_S = 30.0
EXIT_STATUS_WAIT_S = 2.0
# Confined session processes the pool holds per worker, their channels open, waiting for a program
# (`WorkerProc.take`): an open then writes its program at once, without a round trip to the
# worker, which since it never sees programs would otherwise lie on the open's path.
HELD_SPARES = 1


class SandboxError(RuntimeError):
    """The sandbox itself failed (no worker could start, a session could not be confined), or
    the caller misused it (unknown session). Never raised for anything tool code does."""


def _host_pid(pidfd: int) -> int | None:
    """The pid, in our namespace, of the process a pidfd refers to (from /proc/self/fdinfo)."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}") as f:
            for line in f:
                if line.startswith("Pid:"):
                    pid = int(line.split()[1])
                    return pid if pid > 0 else None
    except (OSError, ValueError):
        pass
    return None


def describe_exit(status: int | None, config: SandboxConfig) -> tuple[ErrorKind, str]:
    """Why a session process ended, as an error kind and a model-readable sentence."""
    if status is None:
        return ErrorKind.CRASH, "the sandbox worker hosting this session died, and the session with it."
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU:
            return ErrorKind.TIMEOUT, f"the session used up its CPU-time budget of {config.session_cpu_s} s."
        if sig == signal.SIGSYS:
            return ErrorKind.FORBIDDEN, "the tool made a system call the sandbox forbids and was killed."
        if sig == signal.SIGKILL:
            return ErrorKind.CRASH, "the tool's process was killed (SIGKILL), e.g. by a resource limit or from outside."
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return ErrorKind.CRASH, f"the tool's process crashed ({name})."
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == wire.EXIT_CHANNEL_LOST:
        return ErrorKind.FORBIDDEN, "the tool closed or broke the sandbox's result channel."
    if os.WIFEXITED(status):
        return ErrorKind.CRASH, f"the tool ended its own process (exit status {os.WEXITSTATUS(status)}, e.g. os._exit)."
    return ErrorKind.CRASH, f"the tool's process ended unexpectedly (wait status {status})."


class SessionProc:
    """One live session process, as the pool sees it."""

    def __init__(
        self, worker: WorkerProc, pid_key: str, pidfd: int, channel: socket.socket, loop: asyncio.AbstractEventLoop
    ):
        self.worker = worker
        self.key = pid_key
        self.pidfd: int | None = pidfd
        self.channel = channel  # the pool's end; wrapped in reader/writer by spawn()
        self._pid: int | None = None
        self.exit: asyncio.Future = loop.create_future()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    @property
    def pid(self) -> int | None:
        """Host pid of the process (diagnostics only: read from the pidfd on first use, not per open)."""
        if self._pid is None and self.pidfd is not None:
            self._pid = _host_pid(self.pidfd)
        return self._pid

    def running(self) -> bool:
        """Whether the process still runs (its pidfd turns readable when it exits)."""
        if self.pidfd is None or self.exit.done():
            return False
        poller = select.poll()
        poller.register(self.pidfd, select.POLLIN)
        return not poller.poll(0)

    def kill(self) -> None:
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except (ProcessLookupError, OSError):
                pass

    def exited(self, status: int | None) -> None:
        if not self.exit.done():
            self.exit.set_result(status)
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    def close(self) -> None:
        self.kill()
        if self.writer is not None:
            self.writer.close()
        else:
            self.channel.close()

    async def lost(self, config: SandboxConfig) -> tuple[ErrorKind, str]:
        """Why the channel to this process ended: its exit status (which the worker reports just
        after the process dies), or, if it is still alive, that the tool broke the channel."""
        try:
            status = await asyncio.wait_for(asyncio.shield(self.exit), EXIT_STATUS_WAIT_S)
        except asyncio.TimeoutError:
            self.kill()
            return ErrorKind.FORBIDDEN, "the tool closed or broke the sandbox's result channel and was stopped."
        return describe_exit(status, config)


@dataclass(frozen=True)
class WorkerOwner:
    """What a worker needs from the pool that owns it, handed in so that supervision stands below
    the pool: the pool's loop and config, the command that starts a worker (given the fd of its
    control channel's end), where to keep a started process (the pool's finalizer kills them), and
    whom to tell that a worker died."""

    loop: asyncio.AbstractEventLoop
    config: SandboxConfig
    command: Callable[[int], WorkerCommand]
    started: Callable[[subprocess.Popen], None]
    died: Callable[[WorkerProc, str], None]


class WorkerProc:
    """One warm worker process and its control channel."""

    def __init__(self, owner: WorkerOwner, slot: int):
        self.owner = owner
        self.slot = slot
        self.loop = owner.loop
        self.popen: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.buf = wire.FrameBuffer(max_frame=1 << 20)
        self.hello: asyncio.Future = self.loop.create_future()
        self.pending: dict[str, asyncio.Future] = {}
        self.procs: dict[str, SessionProc] = {}
        self.send_lock = asyncio.Lock()
        self._keys = itertools.count(1)  # the worker knows a session start only by this number
        self.held: deque[SessionProc] = deque()  # HELD_SPARES, see there
        self._holding: asyncio.Task | None = None
        self.alive = False
        self.pid: int | None = None
        self.features: dict = {}

    async def start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            cmd = self.owner.command(child.fileno())
            try:
                self.popen = subprocess.Popen(
                    cmd.argv,
                    pass_fds=[child.fileno(), *cmd.hold_fds],
                    env=cmd.env,
                    cwd=cmd.cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    start_new_session=True,
                )
            finally:
                for fd in cmd.hold_fds:  # the worker holds its copies now (or never started)
                    os.close(fd)
            self.owner.started(self.popen)
        except OSError as exc:
            parent.close()
            raise SandboxError(f"could not start sandbox worker {self.slot}: {exc}") from exc
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        parent.setblocking(False)
        self.sock = parent
        self.alive = True
        self.loop.add_reader(parent.fileno(), self._on_readable)
        try:
            await asyncio.wait_for(asyncio.shield(self.hello), WORKER_START_TIMEOUT_S)
        except asyncio.TimeoutError:
            self.kill()
            raise SandboxError(f"sandbox worker {self.slot} did not start within {WORKER_START_TIMEOUT_S} s") from None
        except SandboxError:
            self.kill()
            raise
        self._hold_more()

    # ---------------------------------------------------------------- control channel
    def _on_readable(self) -> None:
        while self.alive:
            try:
                data, fds, _flags, _addr = socket.recv_fds(self.sock, 1 << 16, wire.MAX_FDS_PER_READ)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data, fds = b"", []
            if not data and not fds:
                self._died("its control channel closed")
                return
            self.buf.feed(data, fds)
            try:
                frames = list(self.buf.frames())
            except wire.ProtocolError as exc:
                self._died(f"it sent a malformed frame ({exc})")
                return
            for msg, msg_fds in frames:
                self._dispatch(msg, msg_fds)

    def _dispatch(self, msg: dict, fds: list[int]) -> None:
        op = msg.get("op")
        if op == "hello":
            self.features = msg
            if fds:
                self.pid = _host_pid(fds[0])
                for fd in fds:
                    os.close(fd)
            if not self.hello.done():
                self.hello.set_result(msg)
        elif op == "fatal":
            for fd in fds:
                os.close(fd)
            self._died(f"it could not start: {msg.get('error')}")
        elif op == "opened":
            key = msg["sid"]
            if len(fds) != 2:
                for fd in fds:
                    os.close(fd)
                self._died(f"it answered an open with {len(fds)} descriptors instead of 2")
                return
            proc = SessionProc(self, key, fds[0], socket.socket(fileno=fds[1]), self.loop)
            self.procs[key] = proc
            fut = self.pending.pop(key, None)
            if fut is not None and not fut.done():
                fut.set_result(proc)
            else:  # the opener gave up meanwhile
                proc.close()
        elif op == "open_failed":
            fut = self.pending.pop(msg["sid"], None)
            if fut is not None and not fut.done():
                fut.set_exception(SandboxError(f"worker {self.slot}: {msg.get('error')}"))
        elif op == "exit":
            proc = self.procs.pop(msg["sid"], None)
            if proc is not None:
                proc.exited(msg.get("status"))
        else:
            for fd in fds:
                os.close(fd)

    # ---------------------------------------------------------------- sessions
    async def take(self) -> SessionProc:
        """A confined session process for a new session: one the pool holds (the program can go
        out at once), else one asked of the worker now. Held ones found dead are dropped."""
        while self.held:
            proc = self.held.popleft()
            if proc.running():
                self._hold_more()
                return proc
            proc.close()
        proc = await self.spawn()
        self._hold_more()
        return proc

    def _hold_more(self) -> None:
        if self.alive and len(self.held) < HELD_SPARES and (self._holding is None or self._holding.done()):
            self._holding = self.loop.create_task(self._hold_one())

    async def _hold_one(self) -> None:
        try:
            proc = await self.spawn()
        except (SandboxError, OSError) as exc:
            # Nothing is lost: the next open asks the worker itself, and reports its failure.
            logger.debug("sandbox worker %d: no session process to hold ahead: %s", self.slot, exc)
            return
        if self.alive:
            self.held.append(proc)
        else:
            proc.close()

    async def spawn(self) -> SessionProc:
        """Have the worker give us a confined session process; returns once it reports the
        process and its channel (the caller then sends the program and reads `ready`). The
        worker never sees the program, nor the session's id: it knows this start by a number."""
        if not self.alive:
            raise SandboxError(f"worker {self.slot} is not running")
        key = str(next(self._keys))
        fut = self.loop.create_future()
        self.pending[key] = fut
        try:
            frame = wire.encode({"op": "open", "sid": key})
            async with self.send_lock:
                await self.loop.sock_sendall(self.sock, frame)
            proc = await asyncio.wait_for(fut, self.owner.config.load_timeout_s)
        except asyncio.TimeoutError:
            self.pending.pop(key, None)
            self._died("it did not answer an open request in time")
            raise SandboxError(f"worker {self.slot} hung while starting a session") from None
        except (OSError, SandboxError):
            self.pending.pop(key, None)
            raise
        try:
            proc.reader, proc.writer = await asyncio.open_connection(sock=proc.channel, limit=1 << 16)
        except BaseException:
            proc.close()
            raise
        return proc

    # ---------------------------------------------------------------- death
    def _died(self, why: str) -> None:
        if not self.alive:
            return
        self.alive = False
        if self.sock is not None:
            self.loop.remove_reader(self.sock.fileno())
            self.sock.close()
        self.buf.close_fds()
        err = SandboxError(f"sandbox worker {self.slot} died: {why}")
        if not self.hello.done():
            self.hello.set_exception(err)
            self.hello.exception()  # mark retrieved
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(err)
        self.pending.clear()
        for proc in self.procs.values():
            proc.kill()
            proc.exited(None)
        self.procs.clear()
        while self.held:
            self.held.popleft().close()
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
        self.owner.died(self, why)

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
        self._died("stopped by the pool")

    def reap(self) -> None:
        if self.popen is not None:
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
