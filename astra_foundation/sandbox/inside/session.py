"""The session process: one episode's tool state, forked from the worker, confined, then serving calls.

Lifecycle (`run`): confine the process (see confine.py), receive the program from the pool and
compile it (here, confined, never in the worker), execute its modules in fresh namespaces, report `ready` (with per-module load errors), then answer `call` frames until the
pool closes the channel. Everything the tool code does happens in this process only; its failures
come back as result frames with a stable `kind` (the values of protocol.ErrorKind).
"""

from __future__ import annotations

import builtins
import errno
import importlib.machinery
import importlib.util
import inspect
import json
import linecache
import marshal
import os
import signal
import socket
import sys
import time
import traceback
import types

from . import confine, wire

_dumps = json.dumps  # bound before tool code runs (see wire.py)
_BUILTINS = dict(vars(builtins))  # restored after every call: a tool that rebinds len() must not break the framing

# OSError errnos that mean "the sandbox said no" rather than "the tool made a mistake".
_FORBIDDEN_ERRNOS = {errno.EPERM, errno.EACCES, errno.EROFS}
FORBIDDEN_HINT = "tools may not use the network, start processes, signal other processes or touch files outside their working directory"


class OutputLimitExceeded(BaseException):
    """Raised into the tool when it prints past the limit (BaseException: `except Exception` cannot swallow it)."""


class CappedSink:
    """sys.stdout/sys.stderr of a call: keeps up to `limit` characters, then stops the tool."""

    encoding = "utf-8"
    errors = "replace"

    def __init__(self, limit: int):
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.overflow = False

    def write(self, s) -> int:
        s = str(s)
        room = self.limit - self.size
        if len(s) > room:
            self.parts.append(s[: max(room, 0)])
            self.size = self.limit
            self.overflow = True
            raise OutputLimitExceeded()
        self.parts.append(s)
        self.size += len(s)
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def getvalue(self) -> str:
        return "".join(self.parts)


def restore_builtins() -> None:
    # Unconditionally: a check that they are untouched costs as much (measured), and one by ==
    # could be fooled by a tool's object that says it equals len.
    current = vars(builtins)
    for name in [n for n in current if n not in _BUILTINS]:
        del current[name]
    current.update(_BUILTINS)


def clean(text: str) -> str:
    """Text safe to frame and to tokenize (lone surrogates replaced)."""
    return text.encode("utf-8", "replace").decode("utf-8")


def render(value) -> str:
    """A return value as the observation text: JSON for containers, str() for the rest."""
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list, tuple)):
        return _dumps(value, ensure_ascii=False, default=str)
    return str(value)


def describe_exception(exc: BaseException, program_files: set[str]) -> str:
    """`Type: message (in module.function, line N)`, pointing at the innermost program frame."""
    where = ""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename in program_files:
            code = f": {frame.line.strip()[:200]}" if frame.line else ""
            where = f" (in {frame.filename[len('<tool ') : -1]}, line {frame.lineno}, in {frame.name}{code})"
            break
    line = traceback.format_exception_only(type(exc), exc)[-1].strip()
    if isinstance(exc, SyntaxError) and exc.lineno:
        where = f" (line {exc.lineno}: {exc.text.strip()[:200]})" if exc.text else f" (line {exc.lineno})"
    if isinstance(exc, ModuleNotFoundError):
        where += " -- only the Python standard library is available in the sandbox"
    return (line[:1500] + where).strip()


def _signature(fn) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


_CO_VARKEYWORDS = inspect.CO_VARKEYWORDS


class KeywordCheck:
    """What `inspect.signature(fn).bind(**kwargs)` decides for a plain Python function, from its
    code object: the names it takes by keyword, the ones it requires, whether it takes **kwargs.
    Built once per function; `accepts` is a set test instead of Signature.bind's Python loop. Only
    for functions whose signature is their code's (no `__wrapped__` / `__signature__`)."""

    __slots__ = ("names", "required", "any_keyword", "impossible", "posonly")

    def __init__(self, fn: types.FunctionType):
        co = fn.__code__
        npos, nkw = co.co_argcount, co.co_kwonlyargcount
        positional, keyword_only = co.co_varnames[:npos], co.co_varnames[npos : npos + nkw]
        n_defaults = len(fn.__defaults__ or ())
        kwdefaults = fn.__kwdefaults__ or {}
        posonly = positional[: co.co_posonlyargcount]
        self.names = frozenset(positional[co.co_posonlyargcount :] + keyword_only)
        required = positional[: npos - n_defaults] + tuple(n for n in keyword_only if n not in kwdefaults)
        # a positional-only parameter without a default can never be passed by keyword
        self.impossible = any(n in required for n in posonly)
        self.required = frozenset(n for n in required if n not in posonly)
        self.any_keyword = bool(co.co_flags & _CO_VARKEYWORDS)
        self.posonly = frozenset(posonly)

    @classmethod
    def of(cls, fn) -> KeywordCheck | None:
        if type(fn) is not types.FunctionType or "__wrapped__" in vars(fn) or "__signature__" in vars(fn):
            return None
        return cls(fn)

    def accepts(self, kwargs: dict) -> bool:
        """True only when Signature.bind would accept `kwargs`; False sends the call to it (a
        positional-only name passed by keyword, which bind's verdict on differs across Pythons)."""
        if self.impossible or not self.required.issubset(kwargs) or not self.posonly.isdisjoint(kwargs):
            return False
        return self.any_keyword or self.names.issuperset(kwargs)


def bad_args_detail(sig: inspect.Signature, kwargs: dict, exc: TypeError) -> str:
    """Every problem with the keywords at once (bind() reports only the first)."""
    params = sig.parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    named = {n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unexpected = [k for k in kwargs if k not in named and not takes_any]
    missing = [
        n for n in named if n not in kwargs and params[n].default is params[n].empty and n not in ("self", "cls")
    ]
    parts = []
    if unexpected:
        parts.append("unexpected argument(s) " + ", ".join(map(repr, unexpected)))
    if missing:
        parts.append("missing required argument(s) " + ", ".join(map(repr, missing)))
    return "; ".join(parts) or str(exc)


def classify(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, OSError) and exc.errno in _FORBIDDEN_ERRNOS:
        return "forbidden"
    return "exception"


class ProgramFinder:
    """Makes a program's modules importable by each other (`import bfcl_env`). Names of the
    standard library are never claimed: there the real module wins, and the program's module of
    that name is reachable through `call` only."""

    def __init__(self, codes: dict[str, types.CodeType]):
        self.codes = codes

    def find_spec(self, name, path=None, target=None):
        if name in self.codes and name not in sys.stdlib_module_names:
            return importlib.machinery.ModuleSpec(name, self, origin=f"<tool {name}>")
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        exec(self.codes[module.__name__], module.__dict__)


class PackageFinder:
    """Imports the installed packages a pool exposes (`SandboxConfig.packages`) from descriptors of
    their directories: only those directories are readable, so the site-packages around them
    cannot be searched. Appended after the path finder: a standard-library name always wins. The
    worker installs it on itself; its sessions inherit it."""

    def __init__(self, roots: dict[str, str]):
        self.roots = roots  # top-level name -> "/proc/self/fd/N"

    def find_spec(self, name, path=None, target=None):
        root = self.roots.get(name) if path is None else None
        if root is None:
            return None
        return importlib.util.spec_from_file_location(name, f"{root}/__init__.py", submodule_search_locations=[root])


class Runtime:
    def __init__(self, sock: socket.socket, codes: dict, compile_errors: dict, max_output: int):
        self.sock = sock
        self.max_output = max_output
        self.codes = codes  # name -> code object (modules that compiled)
        self.errors: dict[str, str] = dict(compile_errors)  # name -> load error message
        self.modules: dict[str, types.ModuleType] = {}
        self.signatures: dict = {}  # function -> inspect.Signature (or None), computed once
        self.checks: dict = {}  # function -> KeywordCheck (or None: not a plain function), computed once
        self.files = {f"<tool {n}>" for n in [*codes, *compile_errors]}

    # ------------------------------------------------------------------ loading
    def load(self) -> None:
        """Execute every module once, in program order; a module another one imports runs first."""
        finder = ProgramFinder(self.codes)
        sys.meta_path.insert(0, finder)
        for name, code in self.codes.items():
            sink = CappedSink(self.max_output)
            sys.stdout = sys.stderr = sink  # what the top level prints is discarded
            try:
                if finder.find_spec(name) is not None:
                    module = importlib.import_module(name)
                else:  # shadowed by a stdlib name: run it outside the import system
                    module = types.ModuleType(name)
                    exec(code, module.__dict__)
                self.modules[name] = module
            except OutputLimitExceeded:
                self.errors[name] = f"module {name!r} printed more than {self.max_output:,} characters while loading"
            except BaseException as exc:  # noqa: BLE001 - any failure of untrusted code is a load error
                self.errors[name] = f"module {name!r} failed to load: {describe_exception(exc, self.files)}"
            finally:
                sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__

    # ------------------------------------------------------------------ calls
    def call(self, module: str, function: str, kwargs: dict) -> dict:
        if module in self.errors:
            return {"ok": False, "kind": "load_error", "msg": self.errors[module]}
        mod = self.modules.get(module)
        if mod is None:
            names = ", ".join(sorted(self.modules)) or "none"
            return {"ok": False, "kind": "not_found", "msg": f"no tool module {module!r}; available: {names}"}
        fn = getattr(mod, function, None)
        if not callable(fn):
            funcs = sorted(k for k, v in vars(mod).items() if callable(v) and not k.startswith("_"))
            return {
                "ok": False,
                "kind": "not_found",
                "msg": f"module {module!r} has no function {function!r}; functions: {', '.join(funcs) or 'none'}",
            }
        sink = CappedSink(self.max_output)
        sys.stdout = sys.stderr = sink
        try:
            result = self._invoke(fn, function, kwargs)
        except OutputLimitExceeded:
            result = {}
        finally:
            restore_builtins()
            sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
        result["stdout"] = clean(sink.getvalue())
        if sink.overflow:  # even if the tool swallowed OutputLimitExceeded and carried on
            return {
                "ok": False,
                "kind": "output_limit",
                "stdout": result["stdout"],
                "msg": f"the tool printed more than {self.max_output:,} characters and was stopped",
            }
        return result

    def signature(self, fn) -> inspect.Signature | None:
        try:
            return self.signatures[fn]
        except KeyError:
            pass
        except TypeError:  # an unhashable callable object: not cached
            return _signature(fn)
        sig = self.signatures[fn] = _signature(fn)
        return sig

    def keyword_check(self, fn) -> KeywordCheck | None:
        try:
            return self.checks[fn]
        except KeyError:
            pass
        except TypeError:  # an unhashable callable object
            return None
        check = self.checks[fn] = KeywordCheck.of(fn)
        return check

    def bad_args(self, fn, function: str, kwargs: dict) -> dict | None:
        """The bad_args result when `kwargs` cannot be passed to `fn`, else None. Plain functions
        are checked from their code object; inspect's Signature is built only for other callables
        and to word a refusal."""
        check = self.keyword_check(fn)
        if check is not None and check.accepts(kwargs):
            return None
        sig = self.signature(fn)
        if sig is None:
            return None
        try:
            sig.bind(**kwargs)
        except TypeError as exc:
            return {"ok": False, "kind": "bad_args", "msg": f"{function}{sig}: {bad_args_detail(sig, kwargs, exc)}"}
        return None

    def _invoke(self, fn, function: str, kwargs: dict) -> dict:
        refused = self.bad_args(fn, function, kwargs)
        if refused is not None:
            return refused
        try:
            out = render(fn(**kwargs))
        except OutputLimitExceeded:
            raise
        except BaseException as exc:  # noqa: BLE001 - untrusted code: every failure becomes a result
            kind = classify(exc)
            msg = describe_exception(exc, self.files)
            if kind == "forbidden":
                msg += f" -- blocked by the sandbox: {FORBIDDEN_HINT}"
            elif kind == "memory":
                msg = "the tool ran out of memory (MemoryError): the session's memory limit was reached"
            return {"ok": False, "kind": kind, "msg": msg}
        if len(out) > self.max_output:
            return {
                "ok": False,
                "kind": "output_limit",
                "msg": f"the tool returned {len(out):,} characters, more than the limit of {self.max_output:,}; "
                f"it starts: {clean(out[:200])!r}",
            }
        return {"ok": True, "out": clean(out)}

    def serve(self) -> None:
        reader = wire.Reader(self.sock, max_frame=wire.SESSION_MAX_FRAME)
        while True:
            try:
                frame = reader.next()
            except (OSError, wire.ProtocolError):  # the tool closed or garbled its own channel
                os._exit(wire.EXIT_CHANNEL_LOST)
            if frame is None:  # the pool closed the session
                return
            req, _ = frame
            args = req.get("a")
            if not isinstance(args, dict):
                resp = {"ok": False, "kind": "bad_args", "msg": "arguments must be a JSON object"}
            else:
                resp = self.call(str(req.get("m")), str(req.get("f")), args)
            resp["id"] = req.get("id")
            try:
                wire.send(self.sock, resp)
            except OSError:
                os._exit(wire.EXIT_CHANNEL_LOST)


# A session's whole environment but HOME and TMPDIR (its work dir). The worker sets it on itself
# once and sessions inherit it: clearing the environment in each fork would touch its pages again.
SESSION_ENV = {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}


def reroot_imports(dirs: list[str], fds: list[int]) -> None:
    """Point every import path at /proc/self/fd/N, a descriptor the worker opened as root: the
    Python install may sit below a directory the session's uid cannot traverse (/root is 0700).
    Packages already imported (encodings, json, xml ...) find their submodules through their own
    `__path__`, so those are rewritten too. The worker calls this once, before any fork: sessions
    inherit the descriptors at the same numbers, and rewriting every module in each session would
    copy-on-write the pages of all of them (a third of a session's page faults, measured)."""
    roots = [(d.rstrip("/"), f"/proc/self/fd/{fd}") for d, fd in zip(dirs, fds, strict=True)]

    def reroot(path: str) -> str:
        for d, via in roots:
            if path == d or path.startswith(d + "/"):
                return via + path[len(d) :]
        return path

    sys.path[:] = [via for _, via in roots]
    sys.path_importer_cache.clear()
    for module in list(sys.modules.values()):
        paths = getattr(module, "__path__", None)
        if isinstance(paths, list):
            paths[:] = [reroot(p) for p in paths]


def read_program(sock: socket.socket) -> tuple[dict, dict]:
    """The program the pool hands over (`marshal` of its (name, source) pairs, written by the pool,
    never by tool code), compiled here: code objects and compile errors. Compiling in the session,
    confined, charges a huge or slow program to its own memory, CPU and load time, and keeps every
    program out of the worker that later sessions are forked from. Sources go to linecache, for
    the lines of tracebacks. Read to its exact end: the pool's requests follow on the channel."""
    header = _recv_exactly(sock, wire.HEADER.size)
    (size,) = wire.HEADER.unpack(header)
    if size > wire.SESSION_MAX_FRAME:
        raise ConnectionError(f"a program frame of {size:,} bytes, more than {wire.SESSION_MAX_FRAME:,}")
    modules = marshal.loads(_recv_exactly(sock, size))
    codes, errors = {}, {}
    for name, source in modules:
        filename = f"<tool {name}>"
        try:
            codes[name] = compile(source, filename, "exec", dont_inherit=True)
        except Exception as exc:  # noqa: BLE001 - SyntaxError, null bytes, nesting too deep, MemoryError ...
            errors[name] = f"module {name!r} failed to load: {describe_exception(exc, {filename})}"
            continue
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    return codes, errors


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = sock.recv_into(view[got:])
        if n == 0:
            raise ConnectionError("the worker closed the channel before handing over a program")
        got += n
    return bytes(buf)


def run(
    sock_fd: int,
    *,
    zygote_pid: int,
    uid: int | None,
    workdir: str,
    tmpfs_mb: int | None,
    limits: dict,
    max_output: int,
    landlock: confine.LandlockRules | None,
    seccomp: confine.SeccompTemplate,
    stdlib_fds: list[int],
    package_fds: dict[str, int],
    own_modules: list[str],
) -> None:
    """Body of the forked session process; never returns. Confines itself, waits for its program,
    loads it and serves calls. Imports already go through `stdlib_fds` (`reroot_imports`, done by
    the worker).

    Over 60 lines because it is the process's whole life in order (parent-death signal, uid,
    confinement, program, call loop, exit): each phase depends on the process state the one
    before left, and one place owns the exit status."""
    code = 0
    try:
        confine.set_parent_death_signal(signal.SIGKILL)
        if os.getppid() != zygote_pid:  # the worker died between fork and prctl
            os._exit(1)
        signal.set_wakeup_fd(-1)
        # Keep only what the session needs: a descriptor inherited from the worker (its control
        # channel, another session's channel) would reach outside the session. The Landlock
        # descriptors are closed by confine() once the ruleset is built.
        landlock_fds = [*landlock.fds, *([landlock.shared] if landlock.shared is not None else [])] if landlock else []
        keep = sorted({0, 1, 2, sock_fd, *stdlib_fds, *package_fds.values(), *landlock_fds})
        for lo, hi in zip(keep, [*keep[1:], None], strict=True):
            if hi is None:
                os.closerange(lo + 1, 1 << 20)
            elif hi > lo + 1:
                os.closerange(lo + 1, hi)
        for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # too-large writes raise OSError(EFBIG) instead
        devnull = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
        sock = socket.socket(fileno=sock_fd)
        try:
            confine.confine(
                uid=uid,
                workdir=workdir,
                tmpfs_mb=tmpfs_mb,
                landlock=landlock,
                seccomp=seccomp,
                **limits,
            )
        except (confine.ConfinementError, OSError, ValueError) as exc:
            wire.send(sock, {"op": "fatal", "error": f"could not confine the session: {exc}"})
            os._exit(3)
        # Before the program arrives: the pool reads this first frame as the confinement's verdict,
        # and no tool code exists in the process yet to forge it (or a `fatal` in its place).
        wire.send(sock, {"op": "confined"})
        os.chdir(workdir)
        os.environ.update({"HOME": workdir, "TMPDIR": workdir})  # the rest is SESSION_ENV, set by the worker
        import tempfile

        tempfile.tempdir = workdir
        for name in own_modules:
            sys.modules.pop(name, None)  # our own package must not shadow a program module named "inside"
        codes, compile_errors = read_program(sock)  # a spare waits here for its session, then compiles
        rt = Runtime(sock, codes, compile_errors, max_output)
        t0 = time.perf_counter()
        rt.load()
        wire.send(sock, {"op": "ready", "errors": rt.errors, "load_s": time.perf_counter() - t0})
        rt.serve()
    except BaseException:  # noqa: BLE001 - the session must end here, never return into the worker's loop
        code = 4
    finally:
        os._exit(code)
