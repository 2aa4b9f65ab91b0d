"""The pool's own parsing under attack: tool code writes forged frames into its result channel.

A tool runs in the session process and can write any bytes into the socket the pool reads its
results from. As a property over a bounded, seeded set of forgeries (random bytes, truncated
headers, deep nesting, huge and oversized-but-valid frames, wrong types, frames for another
call), each written while the program loads and during a call, on both backends: no exception
leaves the pool's API, the session is reset or the failure reported, no session process is left
behind, and the pool goes on serving benign sessions.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import struct
import time

import pytest

from astra_foundation.sandbox import ErrorKind, Module, Program, SandboxPool
from astra_foundation.sandbox.launch import SPARE_SESSIONS
from astra_foundation.sandbox.supervise import HELD_SPARES

pytestmark = pytest.mark.asyncio(loop_scope="module")

LIMIT = 2000  # conftest's max_output_chars

# The tool side: find the one socket among its descriptors (the pool's channel) and write into it.
FORGER = """
import os, stat
def _channel():
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                return fd
        except OSError:
            pass
    raise RuntimeError("no channel found")
def _forge(data):
    fd, view = _channel(), memoryview(data)
    while view:
        view = view[os.write(fd, view):]
"""
HEALTH = "\ndef health():\n    return 'healthy'\n"


def framed(payload: bytes) -> bytes:
    return struct.pack("!I", len(payload)) + payload


def as_json(obj) -> bytes:
    return json.dumps(obj).encode()


def forgeries() -> dict[str, bytes]:
    """Named byte strings a tool writes into its channel. Call ids: a session's first call is 1."""
    rng = random.Random(37)
    cases = {f"random-{i}": bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400))) for i in range(4)}
    cases |= {
        "truncated-header": b"\x00\x00",
        "header-only": struct.pack("!I", 0),
        "not-json": framed(b"\xff\xfe not json"),
        "not-utf8": framed(b'{"id": 1, "ok": true, "out": "\xff"}'),
        "deep-nesting": framed(b"[" * 50_000 + b"]" * 50_000),
        "deep-object": framed(b'{"a":' * 30_000 + b"1" + b"}" * 30_000),
        "nested-below-the-limit": framed(b'{"id": 1, "ok": true, "out": ' + b"[" * 900 + b"]" * 900 + b"}"),
        "huge-int": framed(b'{"id": ' + b"9" * 5000 + b', "ok": true, "out": "x"}'),
        "oversized-header": struct.pack("!I", 1 << 31) + b"{}",
        "oversized-frame": framed(as_json({"id": 1, "ok": True, "out": "A" * 200_000})),
        "huge-but-valid-result": framed(as_json({"id": 1, "ok": True, "out": "A" * 60_000, "stdout": "B" * 3000})),
        "huge-stdout": framed(as_json({"id": 1, "ok": True, "out": "x", "stdout": "B" * (LIMIT + 1)})),
        "huge-error": framed(as_json({"id": 1, "ok": False, "kind": "exception", "msg": "M" * 50_000})),
        "not-an-object": framed(b"[1, 2, 3]"),
        "ok-not-bool": framed(as_json({"id": 1, "ok": "yes", "out": "x"})),
        "id-true": framed(as_json({"id": True, "ok": True, "out": "x"})),
        "out-not-str": framed(as_json({"id": 1, "ok": True, "out": {"a": 1}})),
        "pool-only-kind": framed(as_json({"id": 1, "ok": False, "kind": "timeout", "msg": "fake"})),
        "unknown-kind": framed(as_json({"id": 1, "ok": False, "kind": ["x"], "msg": "fake"})),
        "another-call": framed(as_json({"id": 99, "ok": True, "out": "not yours"})),
        "forged-fatal": framed(as_json({"op": "fatal", "error": "forged"})),
        "forged-ready": framed(as_json({"op": "ready", "errors": {}})),
        "ready-bad-errors": framed(as_json({"op": "ready", "errors": {"nope": 1}})),
        "two-frames": framed(as_json({"id": 1, "ok": True, "out": "a"})) + framed(as_json({"id": 2, "ok": True})),
    }
    return cases


CASES = forgeries()


def at_load(data: bytes) -> Program:
    return Program((Module("m", FORGER + f"_forge({data!r})\n" + HEALTH),))


def in_call(data: bytes) -> Program:
    return Program((Module("m", FORGER + f"def f():\n    _forge({data!r})\n    return 'after'\n" + HEALTH),))


def descendants(pid: int) -> set[int]:
    """Every live process below `pid` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


async def assert_no_stray_processes(pool: SandboxPool, sessions=()) -> None:
    """Every session process the pool still holds is one of `sessions`' current processes, and
    the pool's process tree (its workers' processes and theirs) holds no more than its workers,
    their spares (those the pool holds included) and those sessions."""
    wanted = {pool.session_pid(s) for s in sessions} - {None}
    wrappers = 2 if pool.backend == "bwrap" else 0  # bwrap, and its pid 1 inside the namespace
    bound = pool.config.workers * (wrappers + 1 + SPARE_SESSIONS + HELD_SPARES) + len(wanted)
    deadline = time.monotonic() + 5
    while True:
        spares = {p.pid for w in pool._workers if w is not None for p in w.held}
        held = {p.pid for w in pool._workers if w is not None for p in w.procs.values()} - spares
        # The pool's own processes only: other tests of the same run may leave children of this
        # process running (a served model, Ray), which are not the pool's to answer for.
        roots = [w.popen.pid for w in pool._workers if w is not None and w.popen is not None]
        tree = set(roots).union(*(descendants(r) for r in roots))
        if held <= wanted and len(tree) <= bound:
            return
        assert time.monotonic() < deadline, f"stray session processes: held {held - wanted}, tree {len(tree)} > {bound}"
        await asyncio.sleep(0.05)


def within_limits(r) -> bool:
    return len(r.output) <= LIMIT and len(r.stdout) <= LIMIT and len(r.message) <= LIMIT + 200


async def still_serves(pool) -> None:
    s = await pool.open_session(Program((Module("ok", "def f(x):\n    return x * 2\n"),)))
    r = await pool.call(s, "ok", "f", {"x": 21})
    assert r.ok and r.output == "42", r
    await pool.close_session(s)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_forged_while_loading(pool, case):
    s = await pool.open_session(at_load(CASES[case]))  # never raises for what the program wrote
    try:
        for _ in range(2):
            r = await pool.call(s, "m", "health", {})
            assert within_limits(r), r
            assert r.output in ("", "healthy"), r  # never a forged result
            if not r.ok:
                assert r.error_kind in (ErrorKind.LOAD_ERROR, ErrorKind.FORBIDDEN), r
        await assert_no_stray_processes(pool, [s])
    finally:
        await pool.close_session(s)
    await assert_no_stray_processes(pool)
    await still_serves(pool)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_forged_during_a_call(pool, case):
    s = await pool.open_session(in_call(CASES[case]))
    try:
        assert (await pool.call(s, "m", "health", {})).output == "healthy"
        r = await pool.call(s, "m", "f", {})
        assert within_limits(r), r
        if r.ok:  # a well-formed reply for this very call: the tool may forge its own result
            assert r.output in ("a", "after"), r
        else:
            assert r.error_kind in (ErrorKind.FORBIDDEN, ErrorKind.TIMEOUT, ErrorKind.CRASH), r
            assert "reset" in r.message, r
        # Whatever happened, the session answers again: with a fresh process after a reset, or
        # FORBIDDEN once more when the forged frame left the genuine reply behind in the channel.
        after = await pool.call(s, "m", "health", {})
        assert after.ok or after.error_kind is ErrorKind.FORBIDDEN, after
        if not after.ok:
            assert (await pool.call(s, "m", "health", {})).output == "healthy"
        await assert_no_stray_processes(pool, [s])
    finally:
        await pool.close_session(s)
    await assert_no_stray_processes(pool)
    await still_serves(pool)


# ------------------------------------------------------------------ the audit's cases, exactly
async def test_deep_nesting_at_top_level_opens_and_leaks_nothing(pool):
    """Issue 37, 1: `open_session` raised RecursionError and the session process stayed alive."""
    s = await pool.open_session(at_load(framed(b"[" * 50_000 + b"]" * 50_000)))
    r = await pool.call(s, "m", "health", {})
    assert r.error_kind is ErrorKind.LOAD_ERROR and "interfered" in r.message, r
    await pool.close_session(s)
    await assert_no_stray_processes(pool)


async def test_deep_nesting_in_a_call_is_a_result(pool):
    """Issue 37, 1: `pool.call` raised RecursionError to the caller."""
    s = await pool.open_session(in_call(framed(b"[" * 50_000 + b"]" * 50_000)))
    r = await pool.call(s, "m", "f", {})
    assert r.error_kind is ErrorKind.FORBIDDEN and "result channel" in r.message and "reset" in r.message, r
    assert (await pool.call(s, "m", "health", {})).output == "healthy"
    await pool.close_session(s)


async def test_output_limit_is_enforced_by_the_host(pool):
    """Issue 37, 2: a well-formed forged result 30x the limit came back as ok=True, and the
    genuine reply left behind made the next call FORBIDDEN."""
    forged = framed(as_json({"id": 1, "ok": True, "out": "A" * (30 * LIMIT), "stdout": "B" * (LIMIT + 500)}))
    s = await pool.open_session(in_call(forged))
    r = await pool.call(s, "m", "f", {})
    assert not r.ok and r.error_kind is ErrorKind.FORBIDDEN and "exceeds the limit" in r.message, r
    assert not r.output and not r.stdout
    assert (await pool.call(s, "m", "health", {})).output == "healthy"  # a fresh process, not the stale reply
    await pool.close_session(s)


async def test_forged_fatal_frame_does_not_fail_the_open(pool):
    """A `fatal` frame is the session's confinement verdict only before the program arrives."""
    s = await pool.open_session(at_load(framed(as_json({"op": "fatal", "error": "forged"}))))
    r = await pool.call(s, "m", "health", {})
    assert r.error_kind is ErrorKind.LOAD_ERROR and "interfered" in r.message, r
    await pool.close_session(s)
    await assert_no_stray_processes(pool)
