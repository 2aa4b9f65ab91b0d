"""The warm worker ("zygote"): imports once, forks one process per session, never holds a program.

Started by the pool (inside bubblewrap, or as a plain process) with one end of a unix socket
as its control channel. It runs only trusted code: tool code runs in the forked session
processes, after they confined themselves (session.py).

Pristine. Every session process is a copy of the worker's memory, so the worker keeps nothing a
session should not see: no program passes through it (the pool sends each program straight to
its session process, which compiles it confined, charged to its own limits), and it knows its
sessions only by the pool's opaque keys. A child forgets its siblings right after the fork.

Uids. Each session process gets a uid no live process of the worker holds (`Uids`): a uid comes
back only once the process that held it was reaped, so two sessions never share the per-uid
limits (threads, queued signals) nor the kernel's same-uid permissions.

Spares. A session process is forked and confines itself before its program is known: the
worker keeps `spares` of them waiting (forked while no request is pending), so opening a
session hands a program to a process that is already isolated, and the fork and confinement
(most of a session's start) are off the caller's path. An open with no spare left forks one on
the spot. Every spare is fresh from the zygote (no tool code ran in it) and has its own uid,
work dir and channel: a spare is what a session process was before it got its program.

Control frames:

    pool -> worker  {"op": "open", "sid"}   (sid: the pool's opaque key of this start of a session)
    worker -> pool  {"op": "hello", "landlock", "uid_drop", "private_tmp", "machine"} + a pidfd of the worker
                    {"op": "fatal", "error"}   (it cannot start, e.g. a module of `preload` failed; then exits)
                    {"op": "opened", "sid"} + a pidfd of the session process + the pool's end of its channel
                    {"op": "open_failed", "sid", "error"}
                    {"op": "exit", "sid", "status"}   (raw wait status, once it was reaped)

The worker writes nothing on a session's channel: the pool sends the program on it (session.py).
The worker exits when the control channel closes; its session processes die with it (parent-
death signal, and the pid namespace under bubblewrap).
"""

from __future__ import annotations

import errno
import importlib
import json
import os
import secrets
import selectors
import shutil
import signal
import socket
import sys
from collections import deque
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

SESSION_SOCKET_BUFFER = 1 << 20  # a program (sent once) up to this size does not wait for the session to read it


@dataclass(eq=False)
class Child:
    """A session process of this worker: a spare until a session is handed to it (`sid`)."""

    pid: int
    sock: socket.socket | None  # the worker's end of the session channel, until the hand-off
    workdir: str
    uid: int | None
    sid: str | None = None


class Uids:
    """The uids a worker gives its session processes, from its block [start, start + count).

    A uid is handed out only while no live process of this worker holds it: `take` draws one
    never used yet, or else the one returned longest ago; `give_back` returns it once its process
    was reaped (a reaped process has no threads left, so nothing runs under the uid any more).
    Handing out `start + n % count` instead gave a live session's uid to a new one after `count`
    starts (a few minutes of a busy trainer): they then shared the per-uid limits (the first could
    no longer start a thread) and the kernel let one change the other's rlimits and scheduling."""

    def __init__(self, start: int, count: int):
        self.start, self.count = start, count
        self.fresh = 0  # uids start .. start + fresh - 1 were handed out at least once
        self.returned: deque[int] = deque()  # free again, oldest first
        self.held: set[int] = set()

    def take(self) -> int:
        """A uid no live process holds; OSError(EAGAIN) when all `count` are held."""
        if self.fresh < self.count:
            uid = self.start + self.fresh
            self.fresh += 1
        elif self.returned:
            uid = self.returned.popleft()
        else:
            raise OSError(
                errno.EAGAIN,
                f"all {self.count} session uids of this worker are held by live processes; "
                "lower astra.sandbox.max_sessions or wait for sessions to close",
            )
        self.held.add(uid)
        return uid

    def give_back(self, uid: int) -> None:
        """`uid`'s process was reaped (or never started): it may be handed out again."""
        self.held.remove(uid)  # KeyError for a uid not held: a bookkeeping error must not pass silently
        self.returned.append(uid)


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
        self.uid_drop = os.geteuid() == 0
        self.uids = Uids(*cfg["uids"])
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

    # ------------------------------------------------------------------ session processes
    def spawn(self) -> Child:
        """Fork a session process that confines itself and then waits for its program (a spare).
        Raises OSError when no process can be started."""
        uid = self.uids.take() if self.uid_drop else None
        try:
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError:
            self._free_uid(uid)
            raise
        try:
            mine.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SESSION_SOCKET_BUFFER)
            workdir = self.dirs.take(uid)
        except OSError:
            mine.close()
            theirs.close()
            self._free_uid(uid)
            raise
        try:
            pid = os.fork()
        except OSError:
            mine.close()
            theirs.close()
            self.dirs.discard(workdir)
            self._free_uid(uid)
            raise
        if pid == 0:
            self._forget_siblings()
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
        child = self.children[pid] = Child(pid, mine, workdir, uid)
        return child

    def _free_uid(self, uid: int | None) -> None:
        if uid is not None:
            self.uids.give_back(uid)

    def _forget_siblings(self) -> None:
        """In a new session process, before anything else: drop the worker's records of its other
        session processes (their pids, keys, work dirs and channels), which tool code could
        otherwise reach through the worker object (a frame's f_back, gc.get_objects())."""
        for child in self.spares:
            if child.sock is not None:
                child.sock.close()
        self.children.clear()
        self.spares.clear()
        self.dirs.free.clear()
        self.dirs.trash.clear()

    def open(self, msg: dict, fds: list[int]) -> None:
        """Give the pool the channel and a pidfd of a spare session process (or of one forked
        now); the pool sends the program on that channel itself."""
        sid = msg["sid"]
        for fd in fds:
            os.close(fd)
        child = self._live_spare()
        if child is None:
            try:
                child = self.spawn()
            except OSError as exc:
                wire.send(
                    self.ctl, {"op": "open_failed", "sid": sid, "error": f"could not start a session process: {exc}"}
                )
                return
        child.sid = sid
        pidfd = os.pidfd_open(child.pid)
        try:
            wire.send(self.ctl, {"op": "opened", "sid": sid}, [pidfd, child.sock.fileno()])
        finally:
            os.close(pidfd)
            child.sock.close()
            child.sock = None

    def _live_spare(self) -> Child | None:
        """A spare that is still running; spares found dead are dropped (killed from outside while
        waiting: their exits are reaped as spares')."""
        while self.spares:
            child = self.spares.popleft()
            try:  # WNOWAIT: only a look; reap() collects the status
                dead = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            except ChildProcessError:
                dead = True
            if not dead:
                return child
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
            self._free_uid(child.uid)
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
