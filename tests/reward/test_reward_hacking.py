"""The red-team cases as tests: each exploit policy of `bench/reward_hacking.py`
plays procedural environments through `Toolset.execute`, the sandbox and `score_episode`, and
earns nothing, while the honest policy keeps F1 = 1.

The same episodes under the plain rule (`hacking.plain`: an ok own-tool call whose output contains
the answer, a final answer containing it; what the reward was before these checks) show what the
checks close, on these 60 environments: a zero-call hedge earns F1 0.43 with
`final_answer_correct` 1, echoes hit every time (F1 0.40), list calls with wrong modifiers 0.06,
swapped entities 0.01-0.02 (the procedural world keeps that luck small)."""

from __future__ import annotations

import asyncio
import importlib.util
import random
import sys
import tempfile
from pathlib import Path

import pytest
from testkit import REPO

from astra_foundation.sandbox import SandboxConfig, SandboxPool
from astra_verl.calls.solved import solved_by_call
from astra_verl.rollout.toolset import ToolCatalog
from env_registry.families.procedural import generate
from env_registry.rows import RowInfo, ToolRef
from env_registry.store import EnvStore

_spec = importlib.util.spec_from_file_location("reward_hacking", REPO / "bench" / "reward_hacking.py")
hacking = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = hacking  # its dataclasses resolve annotations through sys.modules
sys.path.insert(0, str(REPO / "bench"))  # it imports its sibling benchkit; only for this import
try:
    _spec.loader.exec_module(hacking)
finally:
    sys.path.remove(str(REPO / "bench"))


@pytest.fixture(scope="module")
def played():
    """{policy: [(env, Play, score, log)]} on 60 environments of seed 3."""
    envs = generate(60, seed=3, max_hops=4)

    async def play_all(store: str):
        catalog = ToolCatalog()
        out = {name: [] for name in hacking.POLICIES}
        async with SandboxPool(SandboxConfig(workers=2)) as sandbox:
            for env in envs:
                row = RowInfo(env_id=env.id, store=store, tools=[ToolRef(env.id, t.name) for t in env.tools])
                toolset = catalog.toolset(row)
                for name, policy in hacking.POLICIES.items():
                    play = policy(env, random.Random(f"{name}/{env.id}"))
                    if name != "honest" and not play.calls and not play.final_answer:
                        continue
                    log, score = await hacking.play_episode(env, toolset, sandbox, play)
                    out[name].append((env, play, score, log))
        return out

    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "envs")
        with EnvStore.open(store, "a") as s:
            s.add_many(envs)
        return asyncio.run(play_all(store))


def hits(env, play, log) -> int:
    """Calls that solved the sub-question they were after."""
    target = env.reward_target()
    return sum(1 for c, (*_, qid) in zip(log.calls, play.calls, strict=True) if qid in solved_by_call(c, target))


def test_the_honest_policy_scores_one_everywhere(played):
    assert len(played["honest"]) == 60
    for env, _, score, _ in played["honest"]:
        assert score.f1 == pytest.approx(1.0, abs=1e-5), env.id
        assert score.final_answer_correct, env.id


def test_a_hedged_final_answer_solves_no_leaf_and_is_not_correct(played):
    assert len(played["hedge"]) >= 10  # comparisons occur
    for env, play, score, _ in played["hedge"]:
        assert " or " in play.final_answer and env.final_answer in play.final_answer
        assert score.f1 == 0.0 and not score.final_answer_correct, (env.id, play.final_answer)
    for env, _, score, _ in played["hedge_after_calls"]:
        leaves = {q.id for q in env.sub_questions if not q.needs_tool}
        assert not leaves & set(score.solved_ids) and not score.final_answer_correct, env.id


@pytest.mark.parametrize("policy", ["example_entity", "random_entity", "echo", "wrong_modifiers"])
def test_an_exploit_call_never_solves_what_it_is_after(played, policy):
    episodes = played[policy]
    assert sum(len(play.calls) for _, play, _, _ in episodes) >= 5, policy  # the exploit was tried
    assert sum(hits(env, play, log) for env, play, _, log in episodes) == 0
    assert max(score.f1 for *_, score, _ in episodes) == 0.0


def plain_hits(env, play, log) -> int:
    target = env.reward_target()
    return sum(
        1
        for c, (*_, qid) in zip(log.calls, play.calls, strict=True)
        if qid in hacking.plain_rule_solved_by_call(c, target)
    )


def test_the_plain_rule_pays_the_exploits_our_rule_refuses(played):
    # The bench's competitor column is a real loophole, not a strawman: the same logs, scored
    # under the plain rule, pay the hedge, the echo and the wrong modifiers, and the honest
    # policy the same 1.0 as ours.
    for env, _, _, log in played["honest"]:
        assert hacking.plain(log, env.reward_target()).f1 == pytest.approx(1.0, abs=1e-5), env.id
    for env, _, _, log in played["hedge"]:
        scored = hacking.plain(log, env.reward_target())
        assert scored.f1 > 0 and scored.final_answer_correct, env.id
    for env, _, _, log in played["hedge_after_calls"]:
        leaves = {q.id for q in env.sub_questions if not q.needs_tool}
        assert leaves <= hacking.plain(log, env.reward_target()).solved_ids, env.id
    echoed = played["echo"]
    assert sum(plain_hits(env, play, log) for env, play, _, log in echoed) == sum(len(p.calls) for _, p, _, _ in echoed)
    assert sum(plain_hits(env, play, log) for env, play, _, log in played["wrong_modifiers"]) > 0


# -- guesses without the measurements, the final answer, natural phrasings ---------------------


@pytest.mark.parametrize(
    "policy",
    ["no_call_guess", "first_candidate", "error_text_answer", "wrong_tool_last_step", "leaf_tool_on_question_entity"],
)
def test_a_comparison_answered_without_its_measurements_earns_nothing(played, policy):
    episodes = played[policy]
    assert len(episodes) >= 3, policy  # the move exists in these environments
    assert max(score.f1 for *_, score, _ in episodes) == 0.0, policy
    # the leaf was named right in some of them: only the dependency rule refuses it
    assert any(score.final_answer_correct for *_, score, _ in episodes) or policy == "error_text_answer"


def test_an_error_message_naming_one_candidate_is_not_an_answer(played):
    for env, _, score, log in played["error_text_answer"]:
        assert log.final_answer == hacking.channel(log.calls[-1].output) and score.solved == 0, env.id


@pytest.mark.parametrize("name", list(hacking.phrasings.AFTER_GOLDEN))
def test_golden_calls_then_no_committed_answer_lose_the_root(played, name):
    rng, lost = random.Random(name), 0
    for env, _, _, log in played["honest"]:
        final = hacking.phrasings.AFTER_GOLDEN[name](env, rng, [c.output for c in log.calls])
        if final is None:
            continue
        target = env.reward_target()
        score = hacking.score_episode(log.model_copy(update={"final_answer": final}), target)
        assert hacking.root_question(target).id not in score.solved_ids, (env.id, final)
        assert score.solved == len(target.sub_questions) - 1 and not score.final_answer_correct, (env.id, final)
        lost += 1
    assert lost >= 20


def test_honest_natural_phrasings_keep_full_credit(played):
    comparisons = 0
    for env, _, _, log in played["honest"]:
        said = hacking.phrasings.phrasings(env)
        assert len(said) >= 6, env.id
        comparisons += bool(hacking.phrasings.Facts(env).names)
        target = env.reward_target()
        for template, text in said.items():
            score = hacking.score_episode(log.model_copy(update={"final_answer": text}), target)
            assert score.f1 == pytest.approx(1.0, abs=1e-5), (env.id, template, text)
            assert score.final_answer_correct, (env.id, template, text)
    assert comparisons >= 10
