"""The variant policies of `bench/reward_variants.py` (issue 49) as tests: each policy with one
fixed behaviour plays environments of every variant through the sandbox, the row's scripted user
and `score_episode`, and its root is counted only where that behaviour is right."""

from __future__ import annotations

import asyncio
import importlib.util
import sys

import pytest
from testkit import REPO

from env_registry.families.procedural import generate
from env_registry.spec import Variant
from env_registry.variants import VariantShares

sys.path.insert(0, str(REPO / "bench"))  # reward_variants imports its siblings reward_hacking and benchkit
try:
    _spec = importlib.util.spec_from_file_location("reward_variants", REPO / "bench" / "reward_variants.py")
    variants = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = variants  # its dataclasses resolve annotations through sys.modules
    _spec.loader.exec_module(variants)
finally:
    sys.path.remove(str(REPO / "bench"))


@pytest.fixture(scope="module")
def results():
    """{policy: {variant: [(root counted, F1)]}} on 60 environments of every variant."""
    envs = generate(60, seed=7, variants=VariantShares.parse("mix"))
    assert {e.variant for e in envs} == set(Variant)
    return asyncio.run(variants.play_variants(envs, workers=2, seed=7))


def _root_share(cells) -> float:
    return sum(root for root, _ in cells) / len(cells)


def test_the_honest_policy_keeps_the_root_and_full_f1_in_every_variant(results):
    for variant, cells in results["honest"].items():
        assert _root_share(cells) == 1.0, variant
        assert all(f1 == pytest.approx(1.0, abs=1e-5) for _, f1 in cells), variant


@pytest.mark.parametrize("policy", [p for p in variants.POLICIES if p != "honest"])
def test_a_fixed_behaviour_earns_no_root_where_it_is_wrong(results, policy):
    for variant, cells in results[policy].items():
        if variant not in variants.RIGHT[policy]:
            assert _root_share(cells) <= variants.TARGET, (policy, variant.value)


def test_each_policy_is_right_somewhere_it_is_meant_to_be(results):
    """The table is not vacuous: a fixed behaviour keeps its root where it is the right one."""
    assert _root_share(results["always_declining"][Variant.UNANSWERABLE]) == 1.0
    assert _root_share(results["declining_after_calls"][Variant.MISSING_FUNCTION]) == 1.0
    assert _root_share(results["answering_without_asking"][Variant.NO_TOOL]) == 1.0


def test_the_report_meets_its_target(results, capsys):
    assert variants.report(results) == []
    assert "always_declining" in capsys.readouterr().out


def test_a_call_in_a_no_tool_environment_is_not_needed():
    """No tool sub-question: a call solves nothing and costs precision (F1 2/3 with one call)."""
    from astra_verl.calls.call_log import CallRecord, EpisodeLog
    from astra_verl.reward.f1 import score_episode
    from env_registry.answer_channel import final_message
    from env_registry.call_gate import CallStatus

    env = next(e for e in generate(40, seed=7, variants=VariantShares.parse("mix")) if e.variant is Variant.NO_TOOL)
    tool = env.tools[0]
    call = CallRecord(
        turn=1, index=0, tool=tool.name, arguments=tool.golden_calls[0].args, status=CallStatus.OK, output="x"
    )
    answered = EpisodeLog(env_id=env.id, calls=[], assistant_turns=1, final_answer=final_message(env))
    assert score_episode(answered, env.reward_target()).f1 == pytest.approx(1.0, abs=1e-5)
    called = answered.model_copy(update={"calls": [call], "assistant_turns": 2})
    assert score_episode(called, env.reward_target()).f1 == pytest.approx(2 / 3, abs=1e-5)
