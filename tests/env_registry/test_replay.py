"""Golden-call replay in the project sandbox: generated envs pass, corrupted ones fail by rule."""

from __future__ import annotations

from env_registry.spec import GoldenCall
from env_registry.validate import Rule, golden_call_of, validate_envs


def _corrupt(env, fn):
    e = env.model_copy(deep=True)
    fn(e)
    return e.with_id()


def test_fifty_generated_envs_replay_clean(envs):
    report = validate_envs(envs[:50], concurrency=16, progress=False)
    assert report.checked == 50 and report.replayed == 50
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
