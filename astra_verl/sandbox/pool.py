"""`SandboxPool`: the asyncio executor behind the `Sandbox` protocol.

Design (why it is fast and why it is safe):

* **Warm workers.** `workers` long-lived worker processes ("zygotes", inside/worker.py), each
  started once inside bubblewrap (or as a plain process). A worker imports the standard
  library modules tools use and compiles each program once (cache keyed by `Program.digest`),
  so starting a session costs a fork, not a Python start-up.
* **One process per session.** Each session is its own process forked from a worker, which
  confines itself (own uid, rlimits, Landlock, seccomp: inside/confine.py) and only then runs the
  program's modules in fresh namespaces. The G rollouts of one GRPO group therefore never share
  tool state, and a hostile tool cannot reach other sessions: they are other processes, with
  other uids, that it may not signal, trace or read.
* **Spares: an open is a hand-off.** A worker forks and confines session processes ahead of
  time, while it is idle (`launch.SPARE_SESSIONS` each); `open_session` gives the program to one
  of them, so the fork and the confinement are off the episode's path. Each worker draws its
  sessions' uids from a block of its own.
* **Direct channels.** The worker creates each session's socketpair and hands the pool its end
  (SCM_RIGHTS) with a pidfd of the session process; calls then travel pool <-> session directly
  as length-prefixed JSON frames (inside/wire.py), and the pool can SIGKILL a session without
  asking the worker, across pid namespaces.
* **Failures are results.** A call that hangs is killed at `call_timeout_s` (TIMEOUT); a session
  process that dies (segfault, os._exit, CPU limit, killed from outside) yields CRASH/TIMEOUT with
  the reason read from its wait status, which its worker reports. Either way the session is
  restarted fresh on its next call, and the message says the tool state was reset. A worker that
  dies takes only its own sessions with it; the pool starts a replacement.
* **Event loop.** A pool belongs to the event loop it was started on; using it from another loop
  raises a RuntimeError that says so. (The rollout keeps one pool per worker, i.e. per event loop,
  in its `RolloutContext`.)
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import resource
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field

from . import launch
from .config import SandboxConfig
from .inside import wire
from .protocol import CallResult, ErrorKind, Program, Sandbox, Session

logger = logging.getLogger("astra_verl.sandbox")

RESET_NOTE = "The episode's tool state was reset: the next call starts from a fresh state."
MAX_PROGRAM_BYTES = 8 << 20
WORKER_START_TIMEOUT_S = 30.0
EXIT_STATUS_WAIT_S = 2.0
MAX_START_FAILURES = 5
UID_RANGE = 1 << 24  # sessions' uids lie in [uid_base, uid_base + UID_RANGE) (config.py checks the room)
REPLACE_GRACE_S = 2.0  # between a worker's death and its report and replacement (see _worker_died)


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


def _timeout(seconds: float):
    """`asyncio.timeout` (3.11+: no extra task per call, which is most of a call's overhead here),
    or an equivalent built on `loop.call_later` for Python 3.10."""
    if hasattr(asyncio, "timeout"):
        return asyncio.timeout(seconds)
    return _Timeout310(seconds)


class _Timeout310:
    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False

    async def __aenter__(self):
        task = asyncio.current_task()
        self.handle = asyncio.get_running_loop().call_later(self.seconds, self._expire, task)
        return self

    def _expire(self, task: asyncio.Task) -> None:
        self.expired = True
        task.cancel()

    async def __aexit__(self, exc_type, exc, tb):
        self.handle.cancel()
        if self.expired and exc_type is asyncio.CancelledError:
            raise asyncio.TimeoutError from None
        return False


def _raise_fd_limit(needed: int) -> None:
    """Lift this process's soft RLIMIT_NOFILE towards `needed` (never above the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


def _failure(kind: ErrorKind, message: str, stdout: str = "") -> CallResult:
    return CallResult(ok=False, output="", stdout=stdout, error_kind=kind, message=message)


def validate_program(program: Program) -> str | None:
    """Why a program cannot be loaded at all (bad module names, too large), or None."""
    names = [m.name for m in program.modules]
    if not names:
        return "the program has no modules"
    for name in names:
        if not isinstance(name, str) or not name.isidentifier() or name.startswith("__"):
            return f"module name {name!r} is not a valid Python identifier"
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        return f"duplicate module name(s): {', '.join(dupes)}"
    size = sum(len(m.source.encode("utf-8", "replace")) for m in program.modules)
    if size > MAX_PROGRAM_BYTES:
        return f"the program's source is {size:,} bytes, more than the limit of {MAX_PROGRAM_BYTES:,}"
    return None


class _SessionProc:
    """One live session process, as the pool sees it."""

    def __init__(
        self, worker: _Worker, pid_key: str, pidfd: int, channel: socket.socket, loop: asyncio.AbstractEventLoop
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


class _Worker:
    """One warm worker process and its control channel."""

    def __init__(self, pool: SandboxPool, slot: int):
        self.pool = pool
        self.slot = slot
        self.loop = pool._loop
        self.popen: subprocess.Popen | None = None
        self.sock: socket.socket | None = None
        self.buf = wire.FrameBuffer(max_frame=1 << 20)
        self.hello: asyncio.Future = self.loop.create_future()
        self.pending: dict[str, asyncio.Future] = {}
        self.procs: dict[str, _SessionProc] = {}
        self.send_lock = asyncio.Lock()
        self.alive = False
        self.pid: int | None = None
        self.features: dict = {}

    async def start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            cmd = launch.worker_command(
                self.pool.backend, self.pool.config, child.fileno(), self.pool._work_root, self.pool._uid_block()
            )
            self.popen = subprocess.Popen(
                cmd.argv,
                pass_fds=[child.fileno()],
                env=cmd.env,
                cwd=cmd.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.pool._popens.append(self.popen)
        except OSError as exc:
            parent.close()
            raise SandboxError(f"could not start sandbox worker {self.slot}: {exc}") from exc
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
            proc = _SessionProc(self, key, fds[0], socket.socket(fileno=fds[1]), self.loop)
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
    async def spawn(self, key: str, program: Program) -> _SessionProc:
        """Have the worker hand `program` to a session process; returns once it reports the
        process and its channel (the program then loads; the caller reads `ready`)."""
        if not self.alive:
            raise SandboxError(f"worker {self.slot} is not running")
        fut = self.loop.create_future()
        self.pending[key] = fut
        try:
            frame = wire.encode(
                {
                    "op": "open",
                    "sid": key,
                    "digest": program.digest,
                    "modules": [[m.name, m.source] for m in program.modules],
                }
            )
            async with self.send_lock:
                await self.loop.sock_sendall(self.sock, frame)
            proc = await asyncio.wait_for(fut, self.pool.config.load_timeout_s)
        except asyncio.TimeoutError:
            self.pending.pop(key, None)
            self._died("it did not answer an open request in time")
            raise SandboxError(f"worker {self.slot} hung while starting a session") from None
        except (OSError, SandboxError):
            self.pending.pop(key, None)
            raise
        proc.reader, proc.writer = await asyncio.open_connection(sock=proc.channel, limit=1 << 16)
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
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
        self.pool._worker_died(self, why)

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


@dataclass
class _State:
    """The pool's record of one open session."""

    session: Session
    program: Program
    names: frozenset[str]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    proc: _SessionProc | None = None
    generation: int = 0
    fatal: str | None = None  # the whole program failed to load: every call is LOAD_ERROR
    load_errors: dict[str, str] = field(default_factory=dict)
    next_id: int = 0


class SandboxPool(Sandbox):
    """Warm, isolated executor for untrusted tool code; see the module docstring."""

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self.backend = launch.resolve_backend(self.config.backend)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: list[_Worker | None] = []
        self._sessions: dict[str, _State] = {}
        self._slots: asyncio.Semaphore | None = None
        self._started: asyncio.Future | None = None
        self._worker_ready: asyncio.Event | None = None
        self._restarts: dict[int, asyncio.Task | asyncio.TimerHandle] = {}  # slot -> pending replacement
        self._start_failures = 0
        self._broken: str | None = None
        self._closing = False
        # Each worker start gets a block of uids of its own and gives them to its sessions in turn:
        # big enough that a worker never has two live sessions with one uid; blocks are drawn from
        # a random place so that pools of other processes on the node are unlikely to share them.
        self._uid_block_size = 1 << max(12, (self.config.max_sessions + launch.SPARE_SESSIONS).bit_length())
        self._uid_blocks_used = random.randrange(UID_RANGE // self._uid_block_size)
        self._max_frame = 6 * (2 * self.config.max_output_chars + 4096) + 65536
        if self.backend == "bwrap":
            self._work_root = launch.SANDBOX_WORK_ROOT
            self._host_tmp = None
        else:
            self._host_tmp = tempfile.mkdtemp(prefix="astra-sandbox-")
            os.chmod(self._host_tmp, 0o711)  # sessions may traverse it, not list it
            self._work_root = self._host_tmp
        self._popens: list[subprocess.Popen] = []  # for the finalizer, which must not reference the pool
        # Set by the finalizer before it kills the workers (at exit, the pool never closed): an event
        # loop still running in another thread must not report those deaths or replace the workers.
        self._stopped = threading.Event()
        self._finalizer = weakref.finalize(self, _kill_all, self._popens, self._host_tmp, self._stopped)

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> SandboxPool:
        """Start the workers (idempotent; the first `open_session` calls it too)."""
        self._check_loop()
        if self._started is None:
            self._started = self._loop.create_future()
            _raise_fd_limit(4 * self.config.max_sessions + 256)  # a socket and a pidfd per session
            self._slots = asyncio.Semaphore(self.config.max_sessions)
            self._worker_ready = asyncio.Event()
            try:
                workers = [_Worker(self, i) for i in range(self.config.workers)]
                self._workers[:] = workers
                results = await asyncio.gather(*(w.start() for w in workers), return_exceptions=True)
                errors = [r for r in results if isinstance(r, BaseException)]
                if len(errors) == len(workers):
                    raise SandboxError(f"no sandbox worker could start: {errors[0]}") from errors[0]
                for w, r in zip(workers, results, strict=True):
                    if isinstance(r, BaseException):
                        logger.error("sandbox worker %d failed to start: %s", w.slot, r)
                self._worker_ready.set()
                logger.info("sandbox: %d worker(s) ready; %s", len(workers) - len(errors), self.isolation)
                self._started.set_result(None)
                for w, r in zip(workers, results, strict=True):
                    if isinstance(r, BaseException):
                        self._worker_died(w, f"it failed to start: {r}")  # replace it as any dead worker
            except BaseException as exc:
                self._started.set_exception(exc)
                self._started.exception()  # this call raises it; later start() calls await it again
                raise
        else:
            await asyncio.shield(self._started)
        return self

    def _check_loop(self) -> None:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif self._loop is not loop:
            raise RuntimeError(
                "this SandboxPool belongs to another event loop; create one pool per loop "
                "and use it only from that loop"
            )

    async def __aenter__(self) -> SandboxPool:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    @property
    def isolation(self) -> str:
        """What confines this pool's sessions (measured by its workers where started)."""
        features = next((w.features for w in self._workers if w is not None and w.features), None)
        return launch.describe_isolation(self.config, self.backend, features)

    # ---------------------------------------------------------------- workers
    def _worker_died(self, worker: _Worker, why: str) -> None:
        # While the pool starts, start() decides: all workers failing is a setup error, not a crash.
        if self._closing or self._stopped.is_set() or self._loop.is_closed() or not self._started.done():
            return
        slot = worker.slot
        if self._workers[slot] is worker and slot not in self._restarts:
            # Report and replace after a grace period: a host that is shutting down kills its child
            # processes first (Ray's KillChildProcs at a worker's exit: SIGKILL while the event loop
            # still runs) and is gone before it ends; a timer, unlike a task, leaves nothing pending.
            self._restarts[slot] = self._loop.call_later(REPLACE_GRACE_S, self._replace, slot, worker, why)

    def _replace(self, slot: int, old: _Worker, why: str) -> None:
        if self._closing or self._stopped.is_set():
            self._restarts.pop(slot, None)
            return
        logger.warning("sandbox worker %d (pid %s) died: %s; starting a replacement", slot, old.pid, why)
        self._restarts[slot] = self._loop.create_task(self._restart(slot, old))

    async def _restart(self, slot: int, old: _Worker) -> None:
        await asyncio.to_thread(old.reap)
        delay = 0.05
        try:
            while not self._closing:
                worker = _Worker(self, slot)
                try:
                    await worker.start()
                except SandboxError as exc:
                    self._start_failures += 1
                    if self._start_failures >= MAX_START_FAILURES:
                        self._broken = f"sandbox workers keep failing to start: {exc}"
                        logger.error("sandbox: %s", self._broken)
                        self._worker_ready.set()
                        return
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                self._start_failures = 0
                self._workers[slot] = worker
                self._worker_ready.set()
                return
        finally:
            self._restarts.pop(slot, None)

    async def _pick_worker(self) -> _Worker:
        deadline = time.monotonic() + WORKER_START_TIMEOUT_S
        while True:
            if self._broken:
                raise SandboxError(self._broken)
            live = [w for w in self._workers if w is not None and w.alive and w.hello.done()]
            if live:
                return min(live, key=lambda w: len(w.procs) + len(w.pending))
            self._worker_ready.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SandboxError(f"no sandbox worker available after {WORKER_START_TIMEOUT_S} s")
            try:
                await asyncio.wait_for(self._worker_ready.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    def _uid_block(self) -> tuple[int, int]:
        """(first uid, count) for a worker being started."""
        self._uid_blocks_used += 1
        block = self._uid_blocks_used % (UID_RANGE // self._uid_block_size)
        return self.config.uid_base + block * self._uid_block_size, self._uid_block_size

    # ---------------------------------------------------------------- sessions
    async def open_session(self, program: Program) -> Session:
        await self.start()
        if self._closing:
            raise SandboxError("the sandbox pool is closed")
        await self._slots.acquire()
        try:
            session = Session(id=secrets.token_hex(8), program_digest=program.digest)
            st = _State(session=session, program=program, names=frozenset(m.name for m in program.modules))
            st.fatal = validate_program(program)
            if st.fatal is None:
                await self._start_process(st)
        except BaseException:
            self._slots.release()
            raise
        self._sessions[session.id] = st
        return session

    async def _start_process(self, st: _State) -> None:
        """Start (or restart) the session's process; sets st.proc, or st.fatal for a program that
        cannot load. Raises SandboxError when the sandbox itself fails."""
        last: Exception | None = None
        for _attempt in range(3):
            worker = await self._pick_worker()
            st.generation += 1
            key = f"{st.session.id}-{st.generation}"
            try:
                proc = await worker.spawn(key, st.program)
            except SandboxError as exc:  # the worker died or hung: try another one
                last = exc
                continue
            try:
                ready = await asyncio.wait_for(self._read_frame(proc), self.config.load_timeout_s)
            except asyncio.TimeoutError:
                proc.close()
                st.fatal = f"the program's top-level code did not finish within {self.config.load_timeout_s} s"
                return
            except wire.ProtocolError:
                proc.close()
                st.fatal = "the program interfered with the sandbox while loading"
                return
            except (asyncio.IncompleteReadError, ConnectionError):
                kind, why = await proc.lost(self.config)
                proc.close()
                if not worker.alive:
                    last = SandboxError(f"sandbox worker {worker.slot} died while starting a session")
                    continue
                st.fatal = f"the program failed while loading: {why}"
                return
            if ready.get("op") == "fatal":
                proc.close()
                raise SandboxError(f"session could not be isolated: {ready.get('error')}")
            if ready.get("op") != "ready":
                proc.close()
                st.fatal = "the program interfered with the sandbox while loading"
                return
            errors = ready.get("errors") or {}
            st.load_errors = {str(k): str(v) for k, v in errors.items()} if isinstance(errors, dict) else {}
            if st.names <= set(st.load_errors):  # nothing callable: no process needed
                proc.close()
                return
            st.proc = proc
            return
        raise SandboxError(f"could not start a session process: {last}")

    async def _read_frame(self, proc: _SessionProc) -> dict:
        header = await proc.reader.readexactly(wire.HEADER.size)
        (n,) = wire.HEADER.unpack(header)
        if n > self._max_frame:
            raise wire.ProtocolError(f"frame of {n} bytes exceeds the limit of {self._max_frame}")
        payload = await proc.reader.readexactly(n)
        try:
            obj = json.loads(payload)
        except ValueError as exc:
            raise wire.ProtocolError(f"frame is not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise wire.ProtocolError("frame is not a JSON object")
        return obj

    async def call(self, session: Session, module: str, function: str, kwargs: dict) -> CallResult:
        t0 = time.perf_counter()
        self._check_loop()
        st = self._sessions.get(session.id)
        if st is None:
            raise SandboxError(f"session {session.id} is closed or was never opened by this pool")
        result = await self._call(st, module, function, kwargs)
        result.elapsed_s = time.perf_counter() - t0
        return result

    async def _call(self, st: _State, module: str, function: str, kwargs: dict) -> CallResult:
        if st.fatal:
            return _failure(ErrorKind.LOAD_ERROR, f"the tools could not be loaded: {st.fatal}")
        if module not in st.names:
            return _failure(ErrorKind.NOT_FOUND, f"no tool module {module!r}; available: {', '.join(sorted(st.names))}")
        if module in st.load_errors:
            return _failure(ErrorKind.LOAD_ERROR, st.load_errors[module])
        if not isinstance(function, str) or not function.isidentifier():
            return _failure(ErrorKind.NOT_FOUND, f"{function!r} is not a function name")
        if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
            return _failure(ErrorKind.BAD_ARGS, "arguments must be an object with string keys")
        try:
            args_json = json.dumps(kwargs, ensure_ascii=False)  # the tool receives these JSON values only
        except (TypeError, ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            return _failure(ErrorKind.BAD_ARGS, f"arguments are not JSON-serialisable: {exc}")
        async with st.lock:
            if st.proc is None:
                try:
                    await self._start_process(st)
                except SandboxError as exc:
                    return _failure(ErrorKind.CRASH, f"the sandbox could not restart this session: {exc}")
                if st.fatal:
                    return _failure(ErrorKind.LOAD_ERROR, f"the tools could not be loaded: {st.fatal}")
                if st.proc is None:
                    return _failure(ErrorKind.LOAD_ERROR, st.load_errors.get(module, "the tools could not be loaded"))
            proc = st.proc
            st.next_id += 1
            call_id = st.next_id
            payload = f'{{"id":{call_id},"m":{json.dumps(module)},"f":{json.dumps(function)},"a":{args_json}}}'
            frame = wire.frame(payload.encode("utf-8", "replace"))
            try:
                async with _timeout(self.config.call_timeout_s):
                    resp = await self._roundtrip(proc, frame)
                return self._result(resp, call_id)
            except asyncio.TimeoutError:
                st.proc = None
                proc.close()
                return _failure(
                    ErrorKind.TIMEOUT,
                    f"the call did not finish within {self.config.call_timeout_s:g} s and was stopped. {RESET_NOTE}",
                )
            except (asyncio.IncompleteReadError, ConnectionError):
                st.proc = None
                kind, why = await proc.lost(self.config)
                proc.close()
                return _failure(kind, f"{why} {RESET_NOTE}")
            except wire.ProtocolError as exc:
                st.proc = None
                proc.close()
                return _failure(
                    ErrorKind.FORBIDDEN, f"the tool wrote into the sandbox's result channel ({exc}). {RESET_NOTE}"
                )

    async def _roundtrip(self, proc: _SessionProc, frame: bytes) -> dict:
        proc.writer.write(frame)
        await proc.writer.drain()
        return await self._read_frame(proc)

    @staticmethod
    def _result(resp: dict, call_id: int) -> CallResult:
        if resp.get("id") != call_id or not isinstance(resp.get("ok"), bool):
            raise wire.ProtocolError(f"unexpected reply {str(resp)[:100]!r}")
        stdout = resp.get("stdout") or ""
        if resp["ok"]:
            out = resp.get("out")
            if not isinstance(out, str) or not isinstance(stdout, str):
                raise wire.ProtocolError("reply fields have the wrong types")
            return CallResult(ok=True, output=out, stdout=stdout)
        try:
            kind = ErrorKind(resp.get("kind"))
        except ValueError:
            raise wire.ProtocolError(f"unknown error kind {resp.get('kind')!r}") from None
        return _failure(kind, str(resp.get("msg") or kind.value), str(stdout))

    async def close_session(self, session: Session) -> None:
        st = self._sessions.pop(session.id, None)
        if st is None:
            return
        if st.proc is not None:
            st.proc.close()
            st.proc = None
        self._slots.release()

    async def aclose(self) -> None:
        if self._closing:
            return
        self._closing = True
        for st in list(self._sessions.values()):
            if st.proc is not None:
                st.proc.close()
        self._sessions.clear()
        for task in list(self._restarts.values()):
            task.cancel()
        workers = [w for w in self._workers if w is not None]
        for w in workers:
            w.kill()
        await asyncio.to_thread(lambda: [w.reap() for w in workers])
        self._finalizer()

    @property
    def closed(self) -> bool:
        """The pool was closed (or terminated); a closed pool runs nothing again."""
        return self._closing

    def terminate(self) -> None:
        """Kill every worker now, without the event loop (for pools whose loop is gone)."""
        self._closing = True
        self._finalizer()

    # ---------------------------------------------------------------- diagnostics
    def session_pid(self, session: Session) -> int | None:
        """Host pid of the session's current process (None when it has none right now)."""
        st = self._sessions.get(session.id)
        return st.proc.pid if st is not None and st.proc is not None else None

    def worker_pid_of(self, session: Session) -> int | None:
        """Host pid of the worker hosting the session's current process."""
        st = self._sessions.get(session.id)
        return st.proc.worker.pid if st is not None and st.proc is not None else None

    def worker_pids(self) -> list[int | None]:
        """Host pids of the worker processes (inside bwrap: the worker itself, not bwrap)."""
        return [w.pid if w is not None and w.alive else None for w in self._workers]

    @property
    def open_sessions(self) -> int:
        return len(self._sessions)


def _kill_all(popens: list[subprocess.Popen], host_tmp: str | None, stopped: threading.Event) -> None:
    stopped.set()
    for p in popens:
        if p.poll() is None:
            p.kill()
    if host_tmp:
        shutil.rmtree(host_tmp, ignore_errors=True)
