"""What the design left shared between sessions (issue 47, the fourth audit), on both backends:
the worker compiling every program itself, unconfined (a compile bomb killed workers and the
sessions they hosted), other programs' sources in the worker a session is forked from, uids
handed out again while their first session ran (test_uids.py), Linux AIO and POSIX timers (host-wide kernel
budgets), forged reply strings with lone surrogates, and arguments over the session's frame limit.
"""

from __future__ import annotations

import asyncio
import errno
import json
import math
import secrets
import time

import pytest
from sandboxkit import COUNTER, run

from astra_foundation.sandbox import ErrorKind, Module, Program, SandboxPool
from astra_foundation.sandbox.pool import MAX_PROGRAM_BYTES

pytestmark = pytest.mark.asyncio(loop_scope="module")


# ------------------------------------------------------------------ 1: compiled in the session
def compile_bomb(seconds: float) -> str:
    """A module whose compile takes about `seconds` of CPU on this machine, sized from a
    calibration compile of one unit of it here (timings vary 5x on a shared machine)."""
    unit = "".join(f"v{i} = ({i} + {i}) * {i}\n" for i in range(2000))
    t0 = time.process_time()
    compile(unit, "<calibration>", "exec")
    per_unit = max(time.process_time() - t0, 1e-4)
    source = unit * math.ceil(seconds / per_unit)
    if len(source) > MAX_PROGRAM_BYTES:
        pytest.skip(f"compiling is so slow here that {seconds} s of it needs more than {MAX_PROGRAM_BYTES:,} bytes")
    return source


async def test_a_compile_bomb_is_that_programs_load_error(fresh_config, backend):
    """A program that takes longer to compile than the load timeout: before, the worker compiled
    it, was declared hung and killed with every session it hosted, three workers in a row, and
    `open_session` raised; every open on the worker waited behind the compile."""
    load_timeout = 1.0
    bomb = Program((Module("m", compile_bomb(2 * load_timeout) + "def f():\n    return 1\n"),))
    config = fresh_config(backend, workers=1, load_timeout_s=load_timeout, memory_mb=1024, call_timeout_s=5.0)
    async with SandboxPool(config) as pool:
        victim = await pool.open_session(Program((Module("m", COUNTER),)))
        assert (await pool.call(victim, "m", "f", {})).ok
        workers = pool.worker_pids()
        t0 = time.monotonic()
        opening = asyncio.create_task(pool.open_session(bomb))
        await asyncio.sleep(0.2)  # the bomb is compiling now
        t1 = time.monotonic()
        benign = await pool.open_session(Program((Module("m", COUNTER),)))
        benign_open_s = time.monotonic() - t1
        s = await opening  # never raises for what the program is
        bomb_open_s = time.monotonic() - t0
        r = await pool.call(s, "m", "f", {})
        assert r.error_kind is ErrorKind.LOAD_ERROR, r
        assert "did not finish" in r.message or "MemoryError" in r.message, r  # its own time or memory
        assert bomb_open_s < 2 * load_timeout + 1.0, bomb_open_s  # one try, not three workers' worth
        assert benign_open_s < load_timeout, benign_open_s  # not queued behind the compile
        assert pool.worker_pids() == workers  # no worker was killed
        assert json.loads((await pool.call(victim, "m", "f", {})).output)["calls"] == 2  # its state intact
        assert (await pool.call(benign, "m", "f", {})).ok
        for x in (victim, benign, s):
            await pool.close_session(x)


# ------------------------------------------------------------------ 2: a pristine zygote
SNOOP = r"""
import gc, re, sys
_SECRET = re.compile(r"SECRET-[0-9a-f]{16}")
_SESSION_KEY = re.compile(r"^[0-9a-f]{16}-[0-9]+$")  # how the pool named a session start to its worker
def _look(value, found):
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if isinstance(value, str):
        found.update(_SECRET.findall(value))
        if _SESSION_KEY.match(value):
            found.add(value)
def f():
    found = set()
    for obj in gc.get_objects():
        try:
            if isinstance(obj, dict):
                items = [*obj.keys(), *obj.values()]
            elif isinstance(obj, (list, tuple, set, frozenset)):
                items = list(obj)
            else:
                items = list(vars(obj).values()) if hasattr(obj, "__dict__") else []
        except Exception:
            continue
        for value in items:
            _look(value, found)
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            _look(value, found)
        frame = frame.f_back
    return sorted(found)
"""


async def test_a_session_finds_no_other_program_nor_session_in_its_worker(fresh_config, backend):
    """Before, the worker compiled and cached every program, and each session was a copy of it:
    tool code found other programs' sources (and the pool's session ids) through gc or f_back."""
    async with SandboxPool(fresh_config(backend, workers=1, call_timeout_s=20.0)) as pool:
        secret = f"SECRET-{secrets.token_hex(8)}"
        victim = await pool.open_session(Program((Module("v", f"KEY = {secret!r}\ndef f():\n    return 1\n"),)))
        assert (await pool.call(victim, "v", "f", {})).ok
        found = []
        for _ in range(3):  # the third at least is forked after the victim's program reached the worker
            r = await run(pool, SNOOP)
            assert r.ok, r
            found += json.loads(r.output)
        assert secret not in found, found
        assert not [x for x in found if x.startswith(victim.id)], found
        await pool.close_session(victim)


# ------------------------------------------------------------------ 3: uids never shared
SELF_ONLY = """
import ctypes, os, resource
_libc = ctypes.CDLL(None, use_errno=True)
_PRLIMIT = {"x86_64": 302, "aarch64": 261}[os.uname().machine]
def _errno(fn, *args):
    try:
        fn(*args)
        return 0
    except OSError as exc:
        return exc.errno
def f():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = (ctypes.c_uint64 * 2)(soft, hard)
    return {
        "setrlimit": _errno(resource.setrlimit, resource.RLIMIT_NOFILE, (soft - 1, hard)),
        "prlimit_own_pid": _libc.syscall(_PRLIMIT, os.getpid(), resource.RLIMIT_NOFILE, limit, None),
        "prlimit_parent": _errno(resource.prlimit, os.getppid(), resource.RLIMIT_NOFILE),
        "affinity": _errno(os.sched_setaffinity, 0, os.sched_getaffinity(0)),
        "nice": _errno(os.setpriority, os.PRIO_PROCESS, 0, 5),
        "nice_own_pid": _errno(os.setpriority, os.PRIO_PROCESS, os.getpid(), 6),
        "nice_uid": _errno(os.setpriority, os.PRIO_USER, 0, 7),
        "nice_group": _errno(os.setpriority, os.PRIO_PGRP, 0, 7),
        "scheduler_parent": _errno(os.sched_setscheduler, os.getppid(), os.SCHED_OTHER, os.sched_param(0)),
    }
"""


async def test_limits_and_scheduling_of_itself_only(pool):
    """prlimit64, sched_set*, setpriority and ioprio_set change any process of the caller's uid;
    they are allowed on the session itself only, as signals are (pid 0 or its own pid)."""
    r = await run(pool, SELF_ONLY)
    got = json.loads(r.output)
    assert got["setrlimit"] == 0 and got["prlimit_own_pid"] == 0 and got["affinity"] == 0, got
    assert got["nice"] == 0 and got["nice_own_pid"] == 0, got
    assert got["nice_uid"] == got["nice_group"] == 1, got  # EPERM: a whole uid or group
    assert got["prlimit_parent"] == got["scheduler_parent"] == 1, got


# ------------------------------------------------------------------ 4: host-wide kernel budgets
KERNEL = """
import ctypes, os
_libc = ctypes.CDLL(None, use_errno=True)
_NR = {
    "x86_64": {"io_setup": 206, "timer_create": 222},
    "aarch64": {"io_setup": 0, "timer_create": 107},
}[os.uname().machine]
def aio():
    ctx = ctypes.c_uint64(0)
    ret = _libc.syscall(_NR["io_setup"], 1, ctypes.byref(ctx))
    return [ret, ctypes.get_errno()]
def timers():
    made, timer = 0, ctypes.c_int(0)
    while made < 1000:
        if _libc.syscall(_NR["timer_create"], 1, None, ctypes.byref(timer)) != 0:  # CLOCK_MONOTONIC
            return [made, ctypes.get_errno()]
        made += 1
    return [made, 0]
"""


async def test_linux_aio_is_refused(pool):
    """io_setup takes AIO contexts from the host's one budget (fs.aio-max-nr): one session took it
    whole, and every other process got EAGAIN."""
    r = await run(pool, KERNEL, "aio")
    assert json.loads(r.output) == [-1, 1], r  # EPERM


async def test_posix_timers_are_bounded_by_sigpending(pool):
    """Each POSIX timer pins kernel memory outside RLIMIT_AS; the inherited RLIMIT_SIGPENDING
    (~96k) let one session pin ~36 MiB."""
    made, err = json.loads((await run(pool, KERNEL, "timers")).output)
    assert made <= 256 and err == errno.EAGAIN, (made, err)  # a low limit: confine.SIGPENDING (64)


# ------------------------------------------------------------------ 5: lone surrogates
FORGER = """
import os, stat
def _forge(obj_json):
    data = obj_json.encode()
    data = len(data).to_bytes(4, "big") + data
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                os.write(fd, data)
                return
        except OSError:
            pass
def health():
    return "healthy"
"""
SURROGATE = "\\ud800"  # a JSON escape: json.loads makes it a lone surrogate


@pytest.mark.parametrize(
    "reply",
    [
        f'{{"id": 1, "ok": true, "out": "x{SURROGATE}", "stdout": ""}}',
        f'{{"id": 1, "ok": true, "out": "x", "stdout": "{SURROGATE}"}}',
        f'{{"id": 1, "ok": false, "kind": "exception", "msg": "boom {SURROGATE}", "stdout": ""}}',
    ],
    ids=["output", "stdout", "message"],
)
async def test_forged_lone_surrogates_in_a_reply_are_refused(pool, reply):
    s = await pool.open_session(Program((Module("m", FORGER + f"def f():\n    _forge({reply!r})\n"),)))
    r = await pool.call(s, "m", "f", {})
    for text in (r.output, r.stdout, r.message):
        text.encode("utf-8")  # what any consumer writing strict UTF-8 does
    assert r.error_kind is ErrorKind.FORBIDDEN and "result channel" in r.message, r
    assert (await pool.call(s, "m", "health", {})).output == "healthy"
    await pool.close_session(s)


async def test_forged_lone_surrogates_in_load_errors_are_refused(pool):
    ready = f'{{"op": "ready", "errors": {{"m": "{SURROGATE}"}}}}'
    s = await pool.open_session(Program((Module("m", FORGER + f"_forge({ready!r})\n"),)))
    r = await pool.call(s, "m", "health", {})
    r.message.encode("utf-8")
    assert r.error_kind is ErrorKind.LOAD_ERROR and "interfered" in r.message, r
    await pool.close_session(s)


# ------------------------------------------------------------------ 6: arguments over the frame limit
SESSION_MAX_FRAME = 64 << 20  # the largest frame a session reads (inside/wire.py, the same on main)


async def test_arguments_over_the_sessions_frame_limit_are_bad_args(pool):
    """Before, the pool sent them: the session's channel broke, the call came back FORBIDDEN
    (blamed on the tool) and the episode's state was reset."""
    s = await pool.open_session(Program((Module("m", COUNTER),)))
    assert json.loads((await pool.call(s, "m", "f", {})).output)["calls"] == 1
    r = await pool.call(s, "m", "f", {"blob": "a" * SESSION_MAX_FRAME})
    assert r.error_kind is ErrorKind.BAD_ARGS and "bytes" in r.message and "pass less" in r.message, r
    assert json.loads((await pool.call(s, "m", "f", {})).output)["calls"] == 2  # the session untouched
    await pool.close_session(s)
