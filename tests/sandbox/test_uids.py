"""Session uids (issue 47, 3): a uid is handed out only while no live process of the worker holds
it. Before, a worker handed out `start + n % count`: after a block's worth of starts a new
session got the uid of a live one, shared its per-uid limits and could change its rlimits. And a
worker's block is claimed for the host, so two pools never hand out the same uids."""

from __future__ import annotations

import asyncio
import json
import os

import pytest
from sandboxkit import COUNTER

from astra_foundation.sandbox import Module, Program, SandboxError, SandboxPool
from astra_foundation.sandbox.inside.worker import Uids


def test_uids_are_never_handed_out_while_held():
    """The allocation alone, over many times the block (a worker's 4096 starts are a few minutes of
    a busy trainer): a uid held by a live process is never handed out, and one given back is
    reused last."""
    uids = Uids(1000, 8)
    held = [uids.take() for _ in range(3)]  # long-lived sessions
    live: list[int] = []
    for n in range(5000):
        uid = uids.take()
        assert uid not in held and uid not in live, (n, uid)
        assert 1000 <= uid < 1008
        live.append(uid)
        if len(live) > 3:  # short sessions end (reaped) while others run
            uids.give_back(live.pop(0))
    with pytest.raises(OSError, match="held by live processes"):
        for _ in range(8):
            uids.take()
    with pytest.raises(KeyError):
        uids.give_back(999)  # never handed out: a bookkeeping error is loud


PRLIMIT = (
    """
import ctypes, os, resource
_libc = ctypes.CDLL(None, use_errno=True)
_NR = {"x86_64": 302, "aarch64": 261}[os.uname().machine]
def cap(pid):
    limit = (ctypes.c_uint64 * 2)(32 << 20, 32 << 20)
    ret = _libc.syscall(_NR, pid, resource.RLIMIT_AS, limit, None)
    return [ret, ctypes.get_errno()]
"""
    + COUNTER
)


async def open_when_a_uid_is_free(pool, program, tries: int = 100):
    """Open a session; while every uid of the tiny block is still held by a closed session's
    process not yet reaped (a loaded machine reaps late), the pool refuses, as it must: wait."""
    for _ in range(tries - 1):
        try:
            return await pool.open_session(program)
        except SandboxError as exc:
            if "are held by live processes" not in str(exc):
                raise
            await asyncio.sleep(0.1)
    return await pool.open_session(program)


@pytest.mark.slow
@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.skipif(os.geteuid() != 0, reason="sessions get uids of their own only when the pool runs as root")
async def test_a_new_session_never_gets_a_live_sessions_uid(fresh_config, backend):
    """Real forks: a worker's uid block made small, so that handing out uids in turn wraps within
    the test. Before, a session got the uid of a live one after a block's worth of starts, found its
    pid and capped its address space (prlimit64 on a same-uid process)."""
    # long timeouts: 49 sessions of real forks, run beside other work in CI (1.5 s is the shared pool's)
    pool = SandboxPool(fresh_config(backend, workers=1, call_timeout_s=20.0, load_timeout_s=20.0))
    pool._uid_block_size = 16  # the uid block its worker starts with (the real one is >= 4096)
    async with pool:
        victim = await pool.open_session(Program((Module("m", PRLIMIT),)))
        v = json.loads((await pool.call(victim, "m", "f", {})).output)
        shared, capped = [], []
        for _ in range(3 * 16):
            s = await open_when_a_uid_is_free(pool, Program((Module("m", PRLIMIT),)))
            me = json.loads((await pool.call(s, "m", "f", {})).output)
            if me["uid"] == v["uid"]:
                shared.append(me["pid"])
                r = await pool.call(s, "m", "cap", {"pid": v["pid"]})
                if json.loads(r.output)[0] == 0:
                    capped.append(me["pid"])
            await pool.close_session(s)
        grown = await pool.call(victim, "m", "grow", {"mb": 64})
        assert not shared and not capped, (shared, capped)
        assert grown.ok and grown.output == str(64 << 20), grown
        await pool.close_session(victim)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.skipif(os.geteuid() != 0, reason="sessions get uids of their own only when the pool runs as root")
async def test_two_pools_on_a_host_never_share_a_uid_block(fresh_config, backend):
    """Pools draw their workers' uid blocks from a random place; two that drew the same one would
    give live sessions the same uid. Each block is claimed for the host (a lock range the worker
    holds): the second pool skips the first one's block."""
    first = SandboxPool(fresh_config(backend, workers=1))
    second = SandboxPool(fresh_config(backend, workers=1))
    second._uid_blocks_used = first._uid_blocks_used  # both would start with the same block
    async with first, second:
        a = await first.open_session(Program((Module("m", COUNTER),)))
        b = await second.open_session(Program((Module("m", COUNTER),)))
        uid_a = json.loads((await first.call(a, "m", "f", {})).output)["uid"]
        uid_b = json.loads((await second.call(b, "m", "f", {})).output)["uid"]
        block = first._uid_block_size
        assert (uid_a - first.config.uid_base) // block != (uid_b - second.config.uid_base) // block, (uid_a, uid_b)
        await first.close_session(a)
        await second.close_session(b)
