"""The per-worker RolloutContext: one per event loop, one sandbox pool, bounded caches, settings read once."""

from __future__ import annotations

import asyncio

import pytest

from astra_foundation.sandbox import Module, Program, SandboxConfig
from astra_verl.rollout.context import RolloutContext, drop_worker_context, worker_context
from astra_verl.rollout.toolset import ToolCatalog
from env_registry.rows import RowInfo, ToolRef


def program(**modules: str) -> Program:
    return Program(tuple(Module(name, src) for name, src in modules.items()))


async def _shared_in_new_loop():
    return worker_context().sandbox(SandboxConfig(workers=1, backend="process"))


async def _one_pool_per_loop():
    # the assertions of the former sandbox test `test_shared_sandbox_is_one_pool_per_loop`
    a = worker_context().sandbox(SandboxConfig(workers=1, backend="process"))
    assert worker_context().sandbox() is a
    with pytest.raises(ValueError, match="different config"):
        worker_context().sandbox(SandboxConfig(workers=2, backend="process"))
    other = await asyncio.to_thread(lambda: asyncio.run(_shared_in_new_loop()))
    assert other is not a
    s = await a.open_session(program(m="def f():\n    return 2\n"))
    assert (await a.call(s, "m", "f", {})).output == "2"
    await a.aclose()
    drop_worker_context(asyncio.get_running_loop())


def test_worker_context_is_one_pool_per_loop():
    asyncio.run(_one_pool_per_loop())


def test_a_closed_loops_context_is_shut_down_when_the_next_is_asked_for():
    loop = asyncio.new_event_loop()
    ctx = worker_context(loop)
    assert worker_context(loop) is ctx
    pool = loop.run_until_complete(_started(ctx))
    loop.close()
    fresh = asyncio.new_event_loop()
    try:
        assert worker_context(fresh) is not ctx
        assert pool.closed and pool._popens
        assert all(p.wait(timeout=10) is not None for p in pool._popens)  # its workers were killed
    finally:
        drop_worker_context(fresh)
        fresh.close()


async def _started(ctx: RolloutContext):
    pool = ctx.sandbox(SandboxConfig(workers=1, backend="process"))
    await pool.start()
    return pool


def test_catalog_caches_are_bounded(envs):
    catalog = ToolCatalog(max_stores=1, max_targets=2, max_validators=2, max_toolsets=2)
    for env in (envs.city, envs.counter, envs.weather):
        row = RowInfo(
            env_id=env.id, store=str(envs.store), tools=[ToolRef(env_id=env.id, name=t.name) for t in env.tools]
        )
        catalog.toolset(row)
        catalog.target(str(envs.store), env.id)
    assert len(catalog._targets) == 2 and len(catalog._toolsets) == 2 and len(catalog._validators) == 2
    assert len(catalog._stores) == 1


def test_settings_are_read_once_per_trainer_config(trainer_config):
    ctx = RolloutContext()
    first, second = trainer_config(), trainer_config("+astra.rollout.tool_message_format=json")
    assert ctx.settings(first) is ctx.settings(first)  # verl hands every loop the worker's one config
    assert ctx.settings(second).rollout.tool_message_format == "json"
    assert ctx.settings(first).rollout.tool_message_format == "text"  # re-read, not a stale copy
