"""The warm worker ("zygote"): imports once, compiles each program once, forks one process per session.

Started by the pool (inside bubblewrap, or as a plain process) with one end of a unix socket
as its control channel. It runs only trusted code: tool code runs in the forked session
processes, after they confined themselves (session.py).

Spares. A session process is forked and confines itself before its program is known: the
worker keeps `spares` of them waiting (forked while no request is pending), so opening a
session hands a program to a process that is already isolated, and the fork and confinement
(most of a session's start) are off the caller's path. An open with no spare left forks one on
the spot. Every spare is fresh from the zygote (no tool code ran in it) and has its own uid,
work dir and channel: a spare is what a session process was before it got its program.

Control frames:

    pool -> worker  {"op": "open", "sid", "digest", "modules": [[name, source], ...]}
    worker -> pool  {"op": "hello", "landlock", "uid_drop", "private_tmp", "machine"} + a pidfd of the worker
                    {"op": "fatal", "error"}   (it cannot start, e.g. a module of `preload` failed; then exits)
                    {"op": "opened", "sid"} + a pidfd of the session process + the pool's end of its channel
                    {"op": "open_failed", "sid", "error"}
                    {"op": "exit", "sid", "status"}   (raw wait status, once it was reaped)

worker -> session, once, on the session's channel: a frame holding `marshal` of the program's
code objects, compile errors and sources (the worker compiled them; the session only loads them).
The worker exits when the control channel closes; its session processes die with it (parent-
death signal, and the pid namespace under bubblewrap).
"""

from __future__ import annotations

import importlib
import json
import marshal
import os
import secrets
import selectors
import shutil
import signal
import socket
import sys
from collections import OrderedDict, deque
from dataclasses import dataclass

from . import confine, session, wire

# Imported once here so sessions get them for free (fork shares the pages).
PRELOAD = (
    "json", "math", "cmath", "datetime", "re", "random", "copy", "collections", "collections.abc",
    "itertools", "functools", "operator", "string", "decimal", "fractions", "statistics", "hashlib",
    "uuid", "time", "typing", "dataclasses", "enum", "heapq", "bisect", "textwrap", "base64",
    "calendar", "urllib.parse", "difflib", "pprint", "numbers", "struct", "binascii", "unicodedata",
    "csv", "io", "tempfile", "zoneinfo", "abc", "contextlib", "types", "warnings", "weakref",
    "ipaddress", "hmac", "secrets", "locale", "html", "zlib", "array", "glob", "fnmatch", "shlex",
)  # fmt: skip

COMPILE_CACHE_SIZE = 256
SESSION_SOCKET_BUFFER = 1 << 20  # a program (sent once) up to this size does not wait for the session to read it


@dataclass
class Compiled:
    """One program as the worker compiled it, and the blob a session process loads it from."""

    errors: dict[str, str]  # module name -> compile error
    blob: bytes  # marshal of (codes, errors, sources): trusted, the worker made it


@dataclass(eq=False)
class Child:
    """A session process of this worker: a spare until a session is handed to it (`sid`)."""

    pid: int
    sock: socket.socket | None  # the worker's end of the session channel, until the hand-off
    workdir: str
    sid: str | None = None


class WorkDirs:
    """Session work dirs: made before a fork, removed after the session, off the request path.

    With a private tmpfs per session (`recycle`), a work dir is only the mount point of a tmpfs
    that lives in the dead session's own mount namespace: in the worker's it is an empty
    directory, and the next session mounts its own tmpfs on it, in a namespace of its own. Such
    dirs are reused (no mkdir, chown or rmdir per session: on a disk file system with online
    discard an rmdir alone took ~4 ms). Otherwise a dead session's dir, with whatever it wrote,
    goes to `trash`, removed while the worker is idle (or at once past TRASH_LIMIT)."""

    FREE_LIMIT = 64
    TRASH_LIMIT = 64

    def __init__(self, root: str, prefix: str, recycle: bool):
        self.root, self.prefix, self.recycle = root, prefix, recycle
        self.made = 0
        self.free: list[str] = []
        self.trash: list[str] = []

    def take(self, uid: int | None) -> str:
        """A work dir for a new session (owned by `uid` when there is no tmpfs over it)."""
        if self.free:
            return self.free.pop()
        self.made += 1
        path = os.path.join(self.root, f"{self.prefix}{self.made}")
        os.mkdir(path, 0o700)
        if uid is not None:
            try:
                os.chown(path, uid, uid)
            except OSError:
                os.rmdir(path)
                raise
        return path

    def release(self, path: str) -> None:
        """The session of `path` is gone (reaped)."""
        if self.recycle and len(self.free) < self.FREE_LIMIT:
            self.free.append(path)
            return
        self.trash.append(path)
        if len(self.trash) > self.TRASH_LIMIT:
            self.sweep_one()

    def discard(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def sweep_one(self) -> None:
        if self.trash:
            self.discard(self.trash.pop())


class Worker:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.pid = os.getpid()
        self.ctl = socket.socket(fileno=cfg["fd"])
        self.ctl.setblocking(True)
        self.buf = wire.FrameBuffer(max_frame=256 << 20)
        self.children: dict[int, Child] = {}
        self.spares: deque[Child] = deque()
        self.spare_target = cfg["spares"]
        self.cache: OrderedDict[str, Compiled] = OrderedDict()
        self.uid_drop = os.geteuid() == 0
        self.uid_start, self.uid_count = cfg["uids"]
        self.uid_next = 0
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        stdlib = [p for p in sys.path if p and os.path.isdir(p) and p != cfg["pkg_root"]]
        self.stdlib_fds = [os.open(p, os.O_PATH | os.O_DIRECTORY) for p in stdlib]
        session.reroot_imports(stdlib, self.stdlib_fds)
        # Found once here, not by a scan of sys.modules in each session (see reroot_imports).
        self.own_modules = [m for m in sys.modules if m == "inside" or m.startswith("inside.")]
        # name -> fd of an installed package's directory (SandboxConfig.packages), reached like the stdlib
        self.package_fds = {n: os.open(d, os.O_PATH | os.O_DIRECTORY) for n, d in cfg.get("packages", {}).items()}
        if self.package_fds:  # sessions inherit the finder (and whatever the worker preloads through it)
            sys.meta_path.append(
                session.PackageFinder({n: f"/proc/self/fd/{fd}" for n, fd in self.package_fds.items()})
            )
        # Confinement prepared once: sessions only complete it (their work dir, their pid).
        abi = confine.landlock_abi() if cfg["landlock"] else 0
        os.makedirs(cfg["work_root"], mode=0o711, exist_ok=True)  # before the shared Landlock layer names it
        self.landlock = (
            confine.LandlockRules(
                abi, list(dict.fromkeys([*stdlib, *cfg["read_paths"]])), *cfg["fine_read_paths"], cfg["work_root"]
            )
            if abi
            else None
        )
        self.seccomp = confine.seccomp_template()
        scratch = os.path.join(cfg["work_root"], f"probe-{self.pid}")
        os.mkdir(scratch, 0o700)
        self.private_tmp = self.uid_drop and confine.can_mount_private_tmpfs(scratch)
        os.rmdir(scratch)
        # A random tag, not the pid: under bwrap every worker is pid 2 of its own pid namespace, so
        # two workers named their sessions' dirs alike (/tmp/sessions/s2-1 in each, on tmpfses of
        # their own) and a session's path named another worker's session too.
        self.dirs = WorkDirs(cfg["work_root"], f"s{secrets.token_hex(4)}-", recycle=self.private_tmp)

    def compiled(self, digest: str, modules: list) -> Compiled:
        hit = self.cache.get(digest)
        if hit is not None:
            self.cache.move_to_end(digest)
            return hit
        codes, errors, sources = {}, {}, {}
        for name, source in modules:
            filename = f"<tool {name}>"
            try:
                codes[name] = compile(source, filename, "exec", dont_inherit=True)
            except Exception as exc:  # noqa: BLE001 - SyntaxError, null bytes, nesting too deep ...
                errors[name] = f"module {name!r} failed to load: {session.describe_exception(exc, {filename})}"
                continue
            sources[name] = source
        entry = self.cache[digest] = Compiled(errors, marshal.dumps((codes, errors, sources)))
        if len(self.cache) > COMPILE_CACHE_SIZE:
            self.cache.popitem(last=False)
        return entry

    # ------------------------------------------------------------------ session processes
    def _uid(self) -> int | None:
        if not self.uid_drop:
            return None
        self.uid_next += 1
        return self.uid_start + self.uid_next % self.uid_count

    def spawn(self) -> Child:
        """Fork a session process that confines itself and then waits for its program (a spare).
        Raises OSError when no process can be started."""
        uid = self._uid()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            mine.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SESSION_SOCKET_BUFFER)
            workdir = self.dirs.take(uid)
        except OSError:
            mine.close()
            theirs.close()
            raise
        try:
            pid = os.fork()
        except OSError:
            mine.close()
            theirs.close()
            self.dirs.discard(workdir)
            raise
        if pid == 0:
            session.run(
                theirs.detach(),
                zygote_pid=self.pid,
                uid=uid,
                workdir=workdir,
                tmpfs_mb=self.cfg["tmp_mb"] if self.private_tmp else None,
                limits=dict(self.cfg["limits"]),
                max_output=self.cfg["max_output_chars"],
                landlock=self.landlock,
                seccomp=self.seccomp,
                stdlib_fds=self.stdlib_fds,
                package_fds=self.package_fds,
                own_modules=self.own_modules,
            )
        theirs.close()
        child = self.children[pid] = Child(pid, mine, workdir)
        return child

    def open(self, msg: dict, fds: list[int]) -> None:
        """Hand the program to a spare session process (or to one forked now) and give its channel
        and a pidfd of it to the pool."""
        sid = msg["sid"]
        for fd in fds:
            os.close(fd)
        compiled = self.compiled(msg["digest"], msg["modules"])
        frame = wire.frame(compiled.blob)
        child = self._spare_with(frame)
        if child is None:
            try:
                child = self.spawn()
            except OSError as exc:
                wire.send(
                    self.ctl, {"op": "open_failed", "sid": sid, "error": f"could not start a session process: {exc}"}
                )
                return
            try:
                child.sock.sendall(frame)
            except OSError:
                pass  # it died already: the pool reads what it left (a fatal frame) and its exit status
        child.sid = sid
        pidfd = os.pidfd_open(child.pid)
        try:
            wire.send(self.ctl, {"op": "opened", "sid": sid}, [pidfd, child.sock.fileno()])
        finally:
            os.close(pidfd)
            child.sock.close()
            child.sock = None

    def _spare_with(self, frame: bytes) -> Child | None:
        """A spare that accepted the program frame; spares found dead are dropped."""
        while self.spares:
            child = self.spares.popleft()
            try:
                child.sock.sendall(frame)
                return child
            except OSError:  # it died while waiting (killed from outside): its exit is reaped as a spare's
                self._discard(child)
        return None

    def _discard(self, child: Child) -> None:
        if child.sock is not None:
            child.sock.close()
            child.sock = None
        try:
            os.kill(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def replenish(self) -> None:
        """Fork one spare if fewer than the target wait (called when no request is pending)."""
        try:
            self.spares.append(self.spawn())
        except OSError:
            self.spare_target = len(self.spares)  # out of processes or memory: stop trying until an open

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            child = self.children.pop(pid, None)
            if child is None:
                continue
            self.dirs.release(child.workdir)
            if child.sid is None:  # a spare that died before any hand-off: nobody waits for it
                if child in self.spares:
                    self.spares.remove(child)
                if child.sock is not None:
                    child.sock.close()
                # Not replaced until the next open: spares that cannot confine themselves must
                # not turn into a fork loop (that open then reports why, from a process of its own).
                self.spare_target = min(self.spare_target, len(self.spares))
                continue
            wire.send(self.ctl, {"op": "exit", "sid": child.sid, "status": status})

    def serve(self) -> None:
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        pidfd = os.pidfd_open(os.getpid())
        wire.send(
            self.ctl,
            {
                "op": "hello",
                "landlock": self.landlock.abi if self.landlock else 0,
                "uid_drop": self.uid_drop,
                "private_tmp": self.private_tmp,
                "machine": confine.MACHINE,
            },
            [pidfd],
        )
        os.close(pidfd)
        sel = selectors.DefaultSelector()
        sel.register(self.ctl, selectors.EVENT_READ, "ctl")
        sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        while True:
            # Spares are forked, and old work dirs removed, only while no request waits: an open
            # never queues behind them.
            events = sel.select(0 if len(self.spares) < self.spare_target or self.dirs.trash else None)
            if not events:
                if len(self.spares) < self.spare_target:
                    self.replenish()
                else:
                    self.dirs.sweep_one()
                continue
            for key, _ in events:
                if key.data == "wake":
                    try:
                        os.read(self.wake_r, 4096)
                    except BlockingIOError:
                        pass
                    self.reap()
                    continue
                data, fds, _flags, _addr = socket.recv_fds(self.ctl, 1 << 16, wire.MAX_FDS_PER_READ)
                if not data and not fds:
                    return  # the pool is gone
                self.buf.feed(data, fds)
                for msg, msg_fds in self.buf.frames():
                    if msg.get("op") == "open":
                        self.spare_target = self.cfg["spares"]
                        self.open(msg, msg_fds)
                    else:
                        for fd in msg_fds:
                            os.close(fd)
            self.reap()

    def shutdown(self) -> None:
        for child in list(self.children.values()):
            try:
                os.kill(child.pid, signal.SIGKILL)
                os.waitpid(child.pid, 0)
            except OSError:
                pass
            self.dirs.discard(child.workdir)
        while self.dirs.trash:
            self.dirs.sweep_one()
        for path in self.dirs.free:
            self.dirs.discard(path)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    if cfg["pkg_root"] in sys.path:
        sys.path.remove(cfg["pkg_root"])
    for name in PRELOAD:
        try:
            __import__(name)
        except ImportError:
            pass  # a trimmed Python build; tools importing it will then fail with ImportError
    os.environ.clear()
    os.environ.update(session.SESSION_ENV)
    worker = Worker(cfg)
    try:
        for name in cfg["preload"]:  # after Worker(): imported through the paths sessions use
            module, _, function = name.partition(":")
            loaded = importlib.import_module(module)
            if function:  # `module:function`: the preload's work, which the module's import does not do
                getattr(loaded, function)()
    except BaseException as exc:  # noqa: BLE001 - any failure of a preload is a start-up error
        wire.send(worker.ctl, {"op": "fatal", "error": f"astra.sandbox.preload: {name!r} failed: {exc!r}"})
        return
    try:
        worker.serve()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        worker.shutdown()
