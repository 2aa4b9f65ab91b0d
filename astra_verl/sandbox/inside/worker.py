"""The warm worker ("zygote"): imports once, compiles each program once, forks one process per session.

Started by the pool (inside bubblewrap, or as a plain process) with one end of a unix socket
as its control channel. It runs only trusted code: tool code runs in the forked session
processes, after they confined themselves (session.py). Control frames:

    pool -> worker  {"op": "open", "sid", "uid", "digest", "modules": [[name, source], ...]}
                    + the session's socket (SCM_RIGHTS)
    worker -> pool  {"op": "hello", "landlock", "uid_drop", "private_tmp", "machine"} + a pidfd of the worker
                    {"op": "opened", "sid"} + a pidfd of the session process
                    {"op": "open_failed", "sid", "error"}
                    {"op": "exit", "sid", "status"}   (raw wait status, once it was reaped)

The worker exits when the control channel closes; its session processes die with it (parent-
death signal, and the pid namespace under bubblewrap).
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import socket
import sys
from collections import OrderedDict

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


class Worker:
    def __init__(self, cfg: dict):
        self.cfg = cfg
        self.pid = os.getpid()
        self.ctl = socket.socket(fileno=cfg["fd"])
        self.ctl.setblocking(True)
        self.buf = wire.FrameBuffer(max_frame=256 << 20)
        self.children: dict[int, tuple[str, str]] = {}  # pid -> (sid, workdir)
        self.cache: OrderedDict[str, tuple[dict, dict]] = OrderedDict()  # digest -> (codes, errors)
        self.uid_drop = os.geteuid() == 0
        self.landlock = confine.landlock_abi() if cfg["landlock"] else 0
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        stdlib = [p for p in sys.path if p and os.path.isdir(p) and p != cfg["pkg_root"]]
        self.stdlib_fds = [os.open(p, os.O_PATH | os.O_DIRECTORY) for p in stdlib]
        session.reroot_imports(stdlib, self.stdlib_fds)
        # Found once here, not by a scan of sys.modules in each session (see reroot_imports).
        self.own_modules = [m for m in sys.modules if m == "inside" or m.startswith("inside.")]
        # name -> fd of an installed package's directory (SandboxConfig.packages), reached like the stdlib
        self.package_fds = {n: os.open(d, os.O_PATH | os.O_DIRECTORY) for n, d in cfg.get("packages", {}).items()}
        self.read_paths = list(dict.fromkeys([*stdlib, *cfg["read_paths"]]))
        os.makedirs(cfg["work_root"], mode=0o711, exist_ok=True)
        scratch = os.path.join(cfg["work_root"], f"probe-{self.pid}")
        os.mkdir(scratch, 0o700)
        self.private_tmp = self.uid_drop and confine.can_mount_private_tmpfs(scratch)
        os.rmdir(scratch)

    def compiled(self, digest: str, modules: list) -> tuple[dict, dict]:
        hit = self.cache.get(digest)
        if hit is not None:
            self.cache.move_to_end(digest)
            return hit
        codes, errors = {}, {}
        for name, source in modules:
            filename = f"<tool {name}>"
            try:
                codes[name] = compile(source, filename, "exec", dont_inherit=True)
            except Exception as exc:  # noqa: BLE001 - SyntaxError, null bytes, nesting too deep ...
                errors[name] = f"module {name!r} failed to load: {session.describe_exception(exc, {filename})}"
                continue
            import linecache

            linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        self.cache[digest] = (codes, errors)
        if len(self.cache) > COMPILE_CACHE_SIZE:
            self.cache.popitem(last=False)
        return codes, errors

    def open(self, msg: dict, fds: list[int]) -> None:
        sid = msg["sid"]
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            wire.send(self.ctl, {"op": "open_failed", "sid": sid, "error": "open frame without a session socket"})
            return
        (sock_fd,) = fds
        codes, errors = self.compiled(msg["digest"], msg["modules"])
        uid = msg["uid"] if self.uid_drop else None
        workdir = os.path.join(self.cfg["work_root"], sid)
        try:
            os.mkdir(workdir, 0o700)
            if uid is not None:
                os.chown(workdir, uid, uid)
            pid = os.fork()
        except OSError as exc:
            os.close(sock_fd)
            shutil.rmtree(workdir, ignore_errors=True)
            wire.send(self.ctl, {"op": "open_failed", "sid": sid, "error": f"could not start a session process: {exc}"})
            return
        if pid == 0:
            session.run(
                sock_fd,
                zygote_pid=self.pid,
                uid=uid,
                workdir=workdir,
                tmpfs_mb=self.cfg["tmp_mb"] if self.private_tmp else None,
                limits=dict(self.cfg["limits"]),
                max_output=self.cfg["max_output_chars"],
                landlock=self.landlock,
                read_paths=self.read_paths,
                stdlib_fds=self.stdlib_fds,
                package_fds=self.package_fds,
                codes=codes,
                compile_errors=errors,
                own_modules=self.own_modules,
            )
        os.close(sock_fd)
        self.children[pid] = (sid, workdir)
        pidfd = os.pidfd_open(pid)
        try:
            wire.send(self.ctl, {"op": "opened", "sid": sid}, [pidfd])
        finally:
            os.close(pidfd)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            entry = self.children.pop(pid, None)
            if entry is None:
                continue
            sid, workdir = entry
            shutil.rmtree(workdir, ignore_errors=True)
            wire.send(self.ctl, {"op": "exit", "sid": sid, "status": status})

    def serve(self) -> None:
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(self.wake_w)
        pidfd = os.pidfd_open(os.getpid())
        wire.send(
            self.ctl,
            {
                "op": "hello",
                "landlock": self.landlock,
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
            for key, _ in sel.select():
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
                        self.open(msg, msg_fds)
                    else:
                        for fd in msg_fds:
                            os.close(fd)
            self.reap()

    def shutdown(self) -> None:
        for pid, (_sid, workdir) in list(self.children.items()):
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except OSError:
                pass
            shutil.rmtree(workdir, ignore_errors=True)


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
        worker.serve()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        worker.shutdown()
