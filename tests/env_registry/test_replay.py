"""Golden-call replay in the project sandbox: generated envs pass, corrupted ones fail by rule."""

from __future__ import annotations

from env_registry.spec import GoldenCall
from env_registry.structure import Rule, golden_call_of
from env_registry.validate import validate_envs


def _corrupt(env, fn):
    e = env.model_copy(deep=True)
    fn(e)
    return e.with_id()


def test_fifty_generated_envs_replay_clean(envs):
    report = validate_envs(envs[:50], concurrency=16, progress=False)
    assert report.checked == 50 and report.replayed == 50 and report.determinism  # replayed twice, same outputs
    assert report.ok, [str(i) for i in report.all_issues()[:5]]


def test_replay_names_the_failing_golden_call(envs):
    env = next(e for e in envs if len(e.tools) >= 2)
    tool = env.tools[0]

    def wrong_expected(e):
        # Structurally fine (the sub-question's answer moves too), but the tool never outputs it.
        old = e.tools[0].golden_calls[0].expected
        e.tools[0].golden_calls[0] = GoldenCall(args=e.tools[0].golden_calls[0].args, expected="987654321")
        for q in e.sub_questions:
            if q.tool == tool.name and q.answer == old:
                q.answer = "987654321"
                q.match = q.match.model_copy(update={"kind": "numeric"})

    def raises(e):
        e.tools[1].source += f"\n\ndef {e.tools[1].name}(**kwargs):\n    raise RuntimeError('mock backend down')\n"

    def unloadable(e):
        e.tools[0].source = "raise SystemExit('no')\n" + e.tools[0].source

    bad = {
        "mismatch": _corrupt(env, wrong_expected),
        "raises": _corrupt(env, raises),
        "unloadable": _corrupt(env, unloadable),
    }
    report = validate_envs([env, *bad.values()], concurrency=4, progress=False)
    assert env.id not in report.issues
    mismatch = report.issues[bad["mismatch"].id]
    assert [(i.rule, i.field) for i in mismatch] == [(Rule.REPLAY_MISMATCH, "tools[0].golden_calls[0]")]
    assert [golden_call_of(i) for i in mismatch] == [(0, 0)]  # the location, typed
    assert "987654321" in mismatch[0].message
    raised = report.issues[bad["raises"].id]
    assert {i.rule for i in raised} == {Rule.REPLAY_ERROR} and all(i.field.startswith("tools[1].") for i in raised)
    assert {golden_call_of(i)[0] for i in raised} == {1}
    assert "mock backend down" in raised[0].message
    assert {i.rule for i in report.issues[bad["unloadable"].id]} == {Rule.REPLAY_ERROR}


def test_replay_names_modules_as_the_rollout_does(envs):
    """One naming rule for a tool's sandbox module: an id that is not a Python identifier (as an
    imported environment may carry before validation) still replays, under the rollout's name."""
    import asyncio

    from astra_foundation.sandbox import SandboxConfig, SandboxPool
    from env_registry.spec import tool_module
    from env_registry.validate import replay_env

    env = envs[0].model_copy(update={"id": "bfcl.v4-base/0"})
    assert tool_module("get_x", "bfcl.v4-base/0") == "get_x__bfcl_v4_"

    async def main():
        async with SandboxPool(SandboxConfig(workers=1)) as pool:
            return await replay_env(env, pool)

    assert asyncio.run(main()) == []


def _wrapped(env, extra: str):
    """`env` with its first tool's output wrapped in a dict that adds `extra` (a Python expression)."""
    tool = env.tools[0].name

    def wrap(e):
        e.tools[0].source += (
            f"\n\n_inner = {tool}\n\n\ndef {tool}(**kwargs):\n"
            f"    import time, uuid\n    return {{'result': _inner(**kwargs), 'extra': {extra}}}\n"
        )

    return _corrupt(env, wrap)


def test_determinism_rejects_random_ids_and_clocks_and_shows_both_outputs(envs):
    env = envs[1]
    random_id = _wrapped(env, "'TXN' + uuid.uuid4().hex[:12]")
    clock = _wrapped(env, "time.strftime('%H:%M:%S')")  # whole seconds: caught only because replays are >= 1 s apart
    steady = _wrapped(env, "'TXN123456789'")
    report = validate_envs([env, random_id, clock, steady], concurrency=4, progress=False)
    assert report.determinism and report.replayed == 4
    assert env.id not in report.issues and steady.id not in report.issues
    for bad in (random_id, clock):
        issues = report.issues[bad.id]
        assert {i.rule for i in issues} == {Rule.DETERMINISM}
        assert all(i.field.startswith("tools[0].golden_calls[") for i in issues)
    message = report.issues[random_id.id][0].message
    assert "two fresh sessions" in message and message.count("TXN") == 2  # both outputs are shown
    # the second replay is what catches them: replayed once, both pass
    once = validate_envs([random_id, clock], concurrency=4, progress=False, determinism=False)
    assert once.ok and not once.determinism
