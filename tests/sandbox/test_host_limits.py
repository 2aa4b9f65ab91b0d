"""Memory, host metadata and what a session may import, on both backends:
memfd memory outside RLIMIT_AS, inotify/fanotify on host paths, timestamps and xattrs written to
host files, the compile cache keyed by an ambiguous digest, lone surrogates in tool source, and
the interpreter's site-packages reachable beside its standard library."""

from __future__ import annotations

import json
import os
import site
import sys
import sysconfig
import tempfile

import pytest
from sandboxkit import run

from astra_foundation.sandbox import ErrorKind, Module, Program, SandboxPool

pytestmark = pytest.mark.asyncio(loop_scope="module")

CONTAINED = {ErrorKind.FORBIDDEN, ErrorKind.EXCEPTION}  # refused, or the path does not exist (bwrap)


@pytest.fixture(scope="module")
def host_file():
    """A world-writable file in a world-readable host directory: only the sandbox keeps a session
    from changing its metadata."""
    d = tempfile.mkdtemp(prefix="astra-meta-")
    os.chmod(d, 0o755)
    path = os.path.join(d, "shared.txt")
    with open(path, "w") as f:
        f.write("host")
    os.chmod(path, 0o666)
    os.utime(path, (1_000_000_000, 1_000_000_000))
    yield path
    import shutil

    shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ 3: memory outside RLIMIT_AS
MEMFD = """
import ctypes, os
def f():
    fds = []
    for _ in range(4):
        fd = os.memfd_create("hold")
        os.ftruncate(fd, 16 << 20)
        os.pwrite(fd, b"x" * (1 << 20), 0)
        fds.append(fd)
    return len(fds)
def raw():
    libc = ctypes.CDLL(None, use_errno=True)
    return [libc.syscall(319 if os.uname().machine == "x86_64" else 279, b"x", 0), ctypes.get_errno()]
def callback():
    hook = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(lambda x: 2 * x)  # libffi closures need no memfd
    return hook(21)
def shared_anonymous():
    import mmap
    m = mmap.mmap(-1, 600 << 20, flags=mmap.MAP_SHARED)  # shared, but address space: RLIMIT_AS counts it
    return len(m)
"""


async def test_memfd_memory_is_refused(pool):
    r = await run(pool, MEMFD)
    assert r.error_kind is ErrorKind.FORBIDDEN and "memfd_create" in r.message, r
    assert (await run(pool, MEMFD, "raw")).output == "[-1, 1]"  # EPERM, through ctypes too
    assert (await run(pool, MEMFD, "callback")).output == "42"
    r = await run(pool, MEMFD, "shared_anonymous")
    assert not r.ok and r.error_kind in (ErrorKind.EXCEPTION, ErrorKind.MEMORY), r  # ENOMEM under RLIMIT_AS


# ------------------------------------------------------------------ 4: the digest and the compile cache
async def test_digest_is_injective():
    """Joining names and sources with NUL made these collide; every pair here must differ."""
    pairs = [
        ((("m1", "x = 1\0m2\0y = 2"),), (("m1", "x = 1"), ("m2", "y = 2"))),
        ((("a", "b"),), (("ab", ""),)),
        ((("a", "\0"),), (("a\0", ""),)),
        ((("a", "x"), ("b", "y")), (("b", "y"), ("a", "x"))),  # order is part of the program
        ((("a", '", "'),), (("a", ""), ("", ""))),
    ]
    for left, right in pairs:
        a = Program(tuple(Module(n, s) for n, s in left))
        b = Program(tuple(Module(n, s) for n, s in right))
        assert a.digest != b.digest, (left, right)
    same = Program((Module("m", "x = 1"),))
    assert same.digest == Program((Module("m", "x = 1"),)).digest


async def test_a_colliding_program_cannot_poison_the_compile_cache(fresh_config, backend):
    """One worker, so both programs meet its cache: before, the benign program got the colliding
    one's compile result (LOAD_ERROR for m1, NOT_FOUND for m2)."""
    evil = Program((Module("m1", "def f():\n    return 1\n\0m2\0def g():\n    return 2\n"),))
    benign = Program((Module("m1", "def f():\n    return 1\n"), Module("m2", "def g():\n    return 2\n")))
    async with SandboxPool(fresh_config(backend, workers=1)) as pool:
        s = await pool.open_session(evil)
        assert (await pool.call(s, "m1", "f", {})).error_kind is ErrorKind.LOAD_ERROR  # null bytes do not compile
        await pool.close_session(s)
        s = await pool.open_session(benign)
        assert (await pool.call(s, "m1", "f", {})).output == "1"
        assert (await pool.call(s, "m2", "g", {})).output == "2"
        await pool.close_session(s)


# ------------------------------------------------------------------ 5: lone surrogates
async def test_lone_surrogate_in_source_opens_and_reports_load_error(pool):
    program = Program((Module("m", "def f():\n    return '\udc80'\n"), Module("n", "def g():\n    return 1\n")))
    assert len(program.digest) == 32  # the digest never raises
    s = await pool.open_session(program)  # raised UnicodeEncodeError
    for module, function in (("m", "f"), ("n", "g")):
        r = await pool.call(s, module, function, {})
        assert r.error_kind is ErrorKind.LOAD_ERROR and "lone surrogate" in r.message, r
    await pool.close_session(s)


# ------------------------------------------------------------------ 6: inotify / fanotify
NOTIFY = """
import ctypes, os
def f():
    libc = ctypes.CDLL(None, use_errno=True)
    out = []
    for call in (lambda: libc.inotify_init1(0), lambda: libc.fanotify_init(0x200, 0)):
        ret = call()
        out.append([ret >= 0, ctypes.get_errno()])
    if os.uname().machine == "x86_64":
        out.append([libc.syscall(253) >= 0, ctypes.get_errno()])  # inotify_init
    return out
"""


async def test_inotify_and_fanotify_are_refused(pool):
    r = await run(pool, NOTIFY)
    assert r.ok, r
    assert all(made is False and err == 1 for made, err in json.loads(r.output)), r.output


# ------------------------------------------------------------------ 7: timestamps and xattrs
META = """
import os
def host_utime(path):
    os.utime(path)
def host_xattr(path):
    os.setxattr(path, "user.note", b"from-a-session")
def own_utime():
    open("own", "w").close()
    os.utime("own", (0, 0))
def own_futimens():
    fd = os.open("own2", os.O_CREAT | os.O_WRONLY)
    os.utime(fd, (0, 0))
def own_xattr():
    open("own3", "w").close()
    os.setxattr("own3", "user.note", b"x")
def own_removexattr():
    open("own4", "w").close()
    os.removexattr("own4", "user.note")
"""


async def test_host_metadata_cannot_be_written(pool, host_file):
    before = os.stat(host_file).st_mtime
    for function in ("host_utime", "host_xattr"):
        r = await run(pool, META, function, {"path": host_file})
        assert r.error_kind in CONTAINED, (function, r)
        if pool.backend == "process":  # the path exists there: the syscall itself must be refused
            assert r.error_kind is ErrorKind.FORBIDDEN, (function, r)
    assert os.stat(host_file).st_mtime == before
    assert "user.note" not in os.listxattr(host_file)


@pytest.mark.parametrize("function", ["own_utime", "own_futimens", "own_xattr", "own_removexattr"])
async def test_metadata_calls_are_refused_in_the_work_dir_too(pool, function):
    """The filter decides by syscall, whatever the file: the same denial on both backends."""
    r = await run(pool, META, function)
    assert r.error_kind is ErrorKind.FORBIDDEN and "Operation not permitted" in r.message, r


# ------------------------------------------------------------------ 8: the standard library only
def _hidden_module() -> tuple[str, str] | None:
    """(hidden dir, a top-level module in it), from this interpreter's package dirs."""
    dirs = {os.path.realpath(d) for d in site.getsitepackages([sys.base_prefix])}  # this interpreter's own
    for d in sorted(d for d in dirs if os.path.isdir(d)):  # a single-file module first: it needs nothing else
        names = sorted(os.listdir(d))
        for name in names:
            if name.endswith(".py") and name[:-3].isidentifier() and name[:-3] not in sys.stdlib_module_names:
                return d, name[:-3]
        for name in names:
            if name.isidentifier() and name not in sys.stdlib_module_names:
                if os.path.isfile(os.path.join(d, name, "__init__.py")):
                    return d, name
    return None


STDLIB_ONLY = """
import importlib, os, sys
def f(name, rels):
    tried = []
    for root in [p for p in sys.path if p.startswith("/proc/self/fd/")]:
        for rel in rels:
            tried.append(os.path.join(root, rel))
    sys.path[:0] = tried
    importlib.invalidate_caches()
    mod = importlib.import_module(name)
    return "imported " + str(getattr(mod, "__file__", ""))
def stdlib():
    import sqlite3, email.parser, xml.dom.minidom, subprocess, zipfile
    return "ok"
"""


async def test_only_the_standard_library_is_importable(pool):
    """Before: the stdlib descriptor's `..` led to the base interpreter's site-packages, and a
    session imported what was installed there."""
    assert (await run(pool, STDLIB_ONLY, "stdlib")).output == "ok"
    found = _hidden_module()
    if found is None:
        pytest.skip("this interpreter has no package installed beside its standard library")
    hidden, name = found
    base = {"base": os.path.realpath(sys.base_prefix), "platbase": os.path.realpath(sys.base_prefix)}
    stdlib = os.path.realpath(sysconfig.get_paths(vars=base)["stdlib"])
    roots = [stdlib, os.path.join(stdlib, "lib-dynload")]
    rels = sorted({os.path.relpath(hidden, r) for r in roots})
    r = await run(pool, STDLIB_ONLY, "f", {"name": name, "rels": rels})
    assert not r.ok and r.error_kind in CONTAINED, (name, rels, r)
    assert "ModuleNotFoundError" in r.message or "Permission denied" in r.message, r
