"""`SandboxPool`: the asyncio executor behind the `Sandbox` protocol.

Design (why it is fast and why it is safe):

* **Warm workers.** `workers` long-lived worker processes ("zygotes", inside/worker.py), each
  started once inside bubblewrap (or as a plain process). A worker imports the standard
  library modules tools use, so starting a session costs a fork, not a Python start-up. It never
  holds a program: the pool sends each program to its session process, which compiles it
  confined (a slow or huge compile is that program's LOAD_ERROR, under its own limits and load
  timeout), so no session inherits another program's source or code.
* **One process per session.** Each session is its own process forked from a worker, which
  confines itself (own uid, rlimits, Landlock, seccomp: inside/confine.py) and only then runs the
  program's modules in fresh namespaces. The G rollouts of one GRPO group therefore never share
  tool state, and a hostile tool cannot reach other sessions: they are other processes, with
  other uids, that it may not signal, trace or read.
* **Spares: an open is a hand-off.** A worker forks and confines session processes ahead of
  time, while it is idle (`launch.SPARE_SESSIONS` each), and the pool holds the channel of one
  more per worker (`supervise.HELD_SPARES`); `open_session` writes the program to a held one, so
  the fork, the confinement and the round trip to the worker are off the episode's path. Each
  worker draws its sessions' uids from a block of its own, never one a live process holds.
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
import fcntl
import json
import logging
import marshal
import os
import random
import resource
import secrets
import shutil
import struct
import subprocess
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field

from . import frames, launch
from .config import SandboxConfig
from .inside import wire
from .protocol import CallResult, ErrorKind, Program, Sandbox, Session
from .supervise import WORKER_START_TIMEOUT_S, SandboxError, SessionProc, WorkerOwner, WorkerProc
from .timeouts import timeout

logger = logging.getLogger("astra_foundation.sandbox")

RESET_NOTE = "The episode's tool state was reset: the next call starts from a fresh state."
MAX_PROGRAM_BYTES = 8 << 20
MAX_START_FAILURES = 5
UID_RANGE = 1 << 24  # sessions' uids lie in [uid_base, uid_base + UID_RANGE) (config.py checks the room)
# One file for every pool on the host: a worker's uid block is a byte range of it, locked (an open
# file description lock) by a descriptor the worker inherits (_claim_uid_block).
UID_LOCK_FILE = "/run/astra-sandbox-uids.lock"
REPLACE_GRACE_S = 2.0  # between a worker's death and its report and replacement (see _worker_died)
MAX_ID_BYTES = 32  # `{"id":N` of a request: a call id's digits and the key


def _raise_fd_limit(needed: int) -> None:
    """Lift this process's soft RLIMIT_NOFILE towards `needed` (never above the hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


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
    size = 0
    for m in program.modules:
        if not isinstance(m.source, str):
            return f"module {m.name!r}: its source is a {type(m.source).__name__}, not a string"
        try:
            size += len(m.source.encode("utf-8"))
        except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 form, so no source to compile
            return f"module {m.name!r}: its source is not valid Unicode (character {exc.start} is a lone surrogate)"
    if size > MAX_PROGRAM_BYTES:
        return f"the program's source is {size:,} bytes, more than the limit of {MAX_PROGRAM_BYTES:,}"
    return None


@dataclass
class _State:
    """The pool's record of one open session."""

    session: Session
    program: Program
    names: frozenset[str]
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    proc: SessionProc | None = None
    fatal: str | None = None  # the whole program failed to load: every call is LOAD_ERROR
    load_errors: dict[str, str] = field(default_factory=dict)
    next_id: int = 0


class SandboxPool(Sandbox):
    """Warm, isolated executor for untrusted tool code; see the module docstring."""

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self.backend = launch.resolve_backend(self.config.backend)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._workers: list[WorkerProc | None] = []
        self._sessions: dict[str, _State] = {}
        self._slots: asyncio.Semaphore | None = None
        self._started: asyncio.Future | None = None
        self._worker_ready: asyncio.Event | None = None
        self._restarts: dict[int, asyncio.Task | asyncio.TimerHandle] = {}  # slot -> pending replacement
        self._start_failures = 0
        self._broken: str | None = None
        self._closing = False
        # Each worker start gets a block of uids of its own and gives them to its sessions, never one
        # a live process of it holds (inside/worker.py's Uids); the block is claimed for the host
        # while the worker lives (_claim_uid_block). Drawn from a random place, so that pools rarely
        # have to skip each other's blocks.
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
                workers = [self._new_worker(i) for i in range(self.config.workers)]
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
    def _new_worker(self, slot: int) -> WorkerProc:
        owner = WorkerOwner(
            loop=self._loop,
            config=self.config,
            command=self._worker_command,
            started=self._popens.append,
            died=self._worker_died,
        )
        return WorkerProc(owner, slot)

    def _worker_command(self, ctl_fd: int) -> launch.WorkerCommand:
        first, count, lock = self._claim_uid_block()
        hold = () if lock is None else (lock,)
        return launch.worker_command(self.backend, self.config, ctl_fd, self._work_root, (first, count), hold)

    def _worker_died(self, worker: WorkerProc, why: str) -> None:
        # While the pool starts, start() decides: all workers failing is a setup error, not a crash.
        if self._closing or self._stopped.is_set() or self._loop.is_closed() or not self._started.done():
            return
        slot = worker.slot
        if self._workers[slot] is worker and slot not in self._restarts:
            # Report and replace after a grace period: a host that is shutting down kills its child
            # processes first (Ray's KillChildProcs at a worker's exit: SIGKILL while the event loop
            # still runs) and is gone before it ends; a timer, unlike a task, leaves nothing pending.
            self._restarts[slot] = self._loop.call_later(REPLACE_GRACE_S, self._replace, slot, worker, why)

    def _replace(self, slot: int, old: WorkerProc, why: str) -> None:
        if self._closing or self._stopped.is_set():
            self._restarts.pop(slot, None)
            return
        logger.warning("sandbox worker %d (pid %s) died: %s; starting a replacement", slot, old.pid, why)
        self._restarts[slot] = self._loop.create_task(self._restart(slot, old))

    async def _restart(self, slot: int, old: WorkerProc) -> None:
        await asyncio.to_thread(old.reap)
        delay = 0.05
        try:
            while not self._closing:
                worker = self._new_worker(slot)
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

    async def _pick_worker(self) -> WorkerProc:
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
        """(first uid, count) of the next block in turn."""
        self._uid_blocks_used += 1
        block = self._uid_blocks_used % (UID_RANGE // self._uid_block_size)
        return self.config.uid_base + block * self._uid_block_size, self._uid_block_size

    def _claim_uid_block(self) -> tuple[int, int, int | None]:
        """(first uid, count, lock descriptor) for a worker being started. As root (sessions then
        run under these uids) the block is claimed for the whole host: a write lock on the byte
        range [first, first + count) of UID_LOCK_FILE, an open file description lock that the
        worker inherits, so it holds while the worker lives, whatever happens to this process. A
        block another worker holds, of this pool or of any other on the host (other bases and
        block sizes included: ranges overlap exactly when uids would), is skipped. Not root: no
        uid drop, nothing to claim (None)."""
        if os.geteuid() != 0:
            return (*self._uid_block(), None)
        try:
            fd = os.open(UID_LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            raise SandboxError(
                f"cannot open {UID_LOCK_FILE}, where the sandbox pools of this host claim their session uids "
                f"({exc}); the pool runs as root, so sessions get uids of their own and need the claim: make /run "
                "writable for root, or run the pool as another user (no uid drop then: docs/security.md)"
            ) from exc
        try:
            for _ in range(UID_RANGE // self._uid_block_size):
                first, count = self._uid_block()
                lock = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, first, count, 0)  # struct flock
                try:
                    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, lock)
                except (BlockingIOError, PermissionError):  # EAGAIN / EACCES: a live worker holds it
                    continue
                return first, count, fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        raise SandboxError(
            f"every block of {self._uid_block_size} session uids from {self.config.uid_base} is held by a live "
            "sandbox worker on this host; close other pools or give this one another astra.sandbox.uid_base"
        )

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
        cannot load. Raises SandboxError when the sandbox itself fails; whatever it raises, no
        process it started stays alive."""
        last: Exception | None = None
        for _attempt in range(3):  # another worker only for a worker's fault, never for the program's
            worker = await self._pick_worker()
            try:
                proc = await worker.take()
            except SandboxError as exc:  # the worker died or hung: try another one
                last = exc
                continue
            try:
                retry = await self._load(st, proc)
            except BaseException:
                proc.close()
                raise
            if retry is None:
                return
            last = retry
        raise SandboxError(f"could not start a session process: {last}")

    async def _load(self, st: _State, proc: SessionProc) -> SandboxError | None:
        """Wait for the session process to confine itself, send it the program, and wait for it to
        compile and load it; keeps it in st.proc, or sets st.fatal (closing it), or returns the
        error to retry on another worker (only when the worker itself died)."""
        try:
            async with timeout(self.config.load_timeout_s):
                refused = frames.confined(await self._read_frame(proc))
                if refused is not None:
                    raise SandboxError(f"session could not be isolated: {refused}")
                # Validated (module names, sizes) by open_session; marshal of str pairs is exact.
                proc.writer.write(wire.frame(marshal.dumps(tuple((m.name, m.source) for m in st.program.modules))))
                await proc.writer.drain()
                ready = await self._read_frame(proc)
            st.load_errors = frames.load_errors(ready, st.names, self.config.max_output_chars)
        except asyncio.TimeoutError:
            proc.close()
            st.fatal = (
                f"compiling the program and running its top-level code did not finish within "
                f"{self.config.load_timeout_s:g} s (astra.sandbox.load_timeout_s); make its modules smaller "
                "or their top level do less"
            )
            return None
        except wire.ProtocolError:
            proc.close()
            st.fatal = "the program interfered with the sandbox while loading"
            return None
        except (asyncio.IncompleteReadError, ConnectionError):
            kind, why = await proc.lost(self.config)
            proc.close()
            if not proc.worker.alive:
                return SandboxError(f"sandbox worker {proc.worker.slot} died while starting a session")
            st.fatal = f"the program failed while loading: {why}"
            return None
        if st.names <= set(st.load_errors):  # nothing callable: no process needed
            proc.close()
            return None
        st.proc = proc
        return None

    async def _read_frame(self, proc: SessionProc) -> dict:
        header = await proc.reader.readexactly(wire.HEADER.size)
        (n,) = wire.HEADER.unpack(header)
        if n > self._max_frame:
            raise wire.ProtocolError(f"frame of {n} bytes exceeds the limit of {self._max_frame}")
        return frames.decode(await proc.reader.readexactly(n))

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
        # The request after its id; checked against what the session reads before anything is sent
        # (a larger frame would break its channel: FORBIDDEN, blamed on the tool, state reset).
        tail = f',"m":{json.dumps(module)},"f":{json.dumps(function)},"a":{args_json}}}'.encode("utf-8", "replace")
        if len(tail) + MAX_ID_BYTES > wire.SESSION_MAX_FRAME:
            return _failure(
                ErrorKind.BAD_ARGS,
                f"the arguments are {len(tail):,} bytes as JSON, more than the {wire.SESSION_MAX_FRAME:,} bytes a "
                "call may carry into the sandbox; nothing was sent and the tool state is unchanged: pass less data",
            )
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
            frame = wire.frame(b'{"id":%d' % call_id + tail)
            try:
                async with timeout(self.config.call_timeout_s):
                    resp = await self._roundtrip(proc, frame)
                return frames.call_result(resp, call_id, self.config.max_output_chars)
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

    async def _roundtrip(self, proc: SessionProc, frame: bytes) -> dict:
        proc.writer.write(frame)
        await proc.writer.drain()
        return await self._read_frame(proc)

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
