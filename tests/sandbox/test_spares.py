"""Spare session processes: forked and confined before a program exists, handed one at open.

What must hold: an open is a hand-off to a process that already existed (and was already
confined), every spare is as fresh and as isolated as a process forked at open, a spare that
dies while waiting costs nothing but a fork, and no two live sessions share a uid.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import pytest

from astra_foundation.sandbox import Module, Program, SandboxPool
from astra_foundation.sandbox.launch import SPARE_SESSIONS
from astra_foundation.sandbox.supervise import HELD_SPARES

pytestmark = pytest.mark.asyncio(loop_scope="module")

PROBE = """
import os
_calls = [0]
def f():
    _calls[0] += 1
    return {"calls": _calls[0], "uid": os.getuid(), "pid": os.getpid()}
def fds():
    open_fds = []
    for fd in range(64):
        try:
            os.fstat(fd)
            open_fds.append(fd)
        except OSError:
            pass
    return open_fds
"""
PROGRAM = Program((Module("m", PROBE),))


def children_of(pid: int) -> set[int]:
    """Host pids whose parent is `pid` (the worker's session processes, spares included)."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(entry))
    return found


async def wait_for(predicate, timeout: float = 10.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting for the worker's spares"
        await asyncio.sleep(0.02)


async def test_an_open_hands_the_program_to_a_waiting_process(fresh_config, backend):
    async with SandboxPool(fresh_config(backend, workers=1)) as pool:
        await pool.start()
        worker = pool.worker_pids()[0]
        await wait_for(lambda: len(children_of(worker)) >= SPARE_SESSIONS)
        spares = children_of(worker)
        s = await pool.open_session(PROGRAM)
        assert pool.session_pid(s) in spares  # the session's process existed before the open
        assert (await pool.call(s, "m", "f", {})).ok
        # the worker forks a replacement while nobody asks it for anything
        await wait_for(lambda: len(children_of(worker) - {pool.session_pid(s)}) >= SPARE_SESSIONS)
        await pool.close_session(s)


async def test_a_spare_is_fresh_and_sees_only_its_own_descriptors(fresh_config, backend):
    async with SandboxPool(fresh_config(backend, workers=1)) as pool:
        a = await pool.open_session(PROGRAM)
        assert (await pool.call(a, "m", "f", {})).output.startswith('{"calls": 1')
        assert (await pool.call(a, "m", "f", {})).output.startswith('{"calls": 2')
        b = await pool.open_session(PROGRAM)  # a spare forked after `a` ran its calls: no state of `a`
        assert (await pool.call(b, "m", "f", {})).output.startswith('{"calls": 1')
        fds_a = (await pool.call(a, "m", "fds", {})).output
        fds_b = (await pool.call(b, "m", "fds", {})).output
        # stdio, the channel, the import-path descriptors: as many in a spare as in any session,
        # and not the descriptors the worker prepares Landlock's rules from
        own_a, own_b = json.loads(fds_a), json.loads(fds_b)
        assert len(own_a) == len(own_b) and own_a[:3] == [0, 1, 2], (own_a, own_b)
        stdlib_dirs = len([p for p in sys.path if os.path.isdir(p) and "site-packages" not in p])
        assert len(own_a) <= 4 + stdlib_dirs, own_a
        for s in (a, b):
            await pool.close_session(s)


async def test_a_spare_killed_while_waiting_is_replaced(fresh_config, backend):
    async with SandboxPool(fresh_config(backend, workers=1)) as pool:
        await pool.start()
        worker = pool.worker_pids()[0]
        # every waiting process there is: the worker's spares and the one the pool holds
        await wait_for(lambda: len(children_of(worker)) >= SPARE_SESSIONS + HELD_SPARES)
        for pid in children_of(worker):
            os.kill(pid, signal.SIGKILL)
        await wait_for(lambda: not children_of(worker))  # reaped by the worker, and not re-forked yet
        s = await pool.open_session(PROGRAM)  # falls back to a process forked for this open
        r = await pool.call(s, "m", "f", {})
        assert r.ok and r.output.startswith('{"calls": 1'), r
        await pool.close_session(s)
        sessions = [await pool.open_session(PROGRAM) for _ in range(2 * SPARE_SESSIONS)]
        assert all([(await pool.call(x, "m", "f", {})).ok for x in sessions])
        for x in sessions:
            await pool.close_session(x)


@pytest.mark.skipif(os.geteuid() != 0, reason="sessions get uids of their own only when the pool runs as root")
async def test_live_sessions_never_share_a_uid(fresh_config, backend):
    config = fresh_config(backend, workers=2)
    async with SandboxPool(config) as pool:
        sessions = [await pool.open_session(PROGRAM) for _ in range(12)]
        uids = [json.loads((await pool.call(s, "m", "f", {})).output)["uid"] for s in sessions]
        assert len(set(uids)) == len(uids), uids
        assert all(config.uid_base <= u < config.uid_base + (1 << 24) for u in uids), uids
        for s in sessions:
            await pool.close_session(s)


@pytest.mark.skipif(os.geteuid() != 0, reason="a private tmpfs per session needs root")
async def test_work_dirs_are_reused_under_private_tmpfs_and_leave_nothing(fresh_config, backend):
    config = fresh_config(backend, workers=1)
    async with SandboxPool(config) as pool:
        cwds = []
        for _ in range(12):
            s = await pool.open_session(Program((Module("m", "import os\ndef f():\n    return os.getcwd()\n"),)))
            cwds.append((await pool.call(s, "m", "f", {})).output)
            await pool.close_session(s)
            await asyncio.sleep(0.05)  # reaped: its dir is free for a later spare
        # mount points are handed on (each session still mounts a fresh tmpfs of its own on it)
        assert len(set(cwds)) < len(cwds), cwds


SESSIONS = 80  # opened and closed one after another by the test below


async def test_work_dirs_of_closed_sessions_do_not_accumulate(fresh_config):
    """Reused (root, private tmpfs) or removed while the worker is idle (no root): either way the
    work root holds as many dirs as were ever in use at once, however many sessions came and went."""
    async with SandboxPool(fresh_config("process", workers=1)) as pool:
        root = pool._work_root
        for _ in range(SESSIONS):
            s = await pool.open_session(PROGRAM)
            assert (await pool.call(s, "m", "f", {})).ok
            await pool.close_session(s)
        # In use at once: the spares (the one the pool holds included), the open session, the spare
        # forked to replace it, and closed sessions not reaped yet; with a private tmpfs the peak
        # stays on the free list for reuse. Measured 6-7 on 2 cores idle, 9 beside a vLLM server
        # under load (reaping lags): the peak depends on the load, a leak on the session count. So
        # the bound is a quarter of the sessions: a leak of one dir in four sessions still fails.
        limit = SESSIONS // 4
        assert SPARE_SESSIONS + HELD_SPARES + 5 < limit
        try:
            await wait_for(lambda: len(os.listdir(root)) <= limit)
        except AssertionError:
            raise AssertionError(
                f"{len(os.listdir(root))} work dirs after {SESSIONS} sessions, > {limit}: {os.listdir(root)}"
            ) from None
