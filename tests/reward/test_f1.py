"""The trajectory-level reward (astra_verl/reward/f1.py): the paper's examples and the edge cases."""

from __future__ import annotations

import pytest

from astra_verl.reward.f1 import RewardMode, precision_recall_f1, score_episode
from env_registry.answer_channel import channel
from env_registry.call_gate import CallStatus


@pytest.mark.parametrize(
    ("solved", "calls", "f1"),
    [(4, 4, 1.0), (4, 6, 0.8), (3, 4, 0.75)],  # docs/method.md §3.2's examples
)
def test_paper_examples_on_counts(solved, calls, f1):
    assert precision_recall_f1(4, solved, calls)[2] == pytest.approx(f1, abs=1e-6)


def test_paper_examples_on_episodes(build):
    t = build.target()
    four = [build.solving_call(i) for i in (1, 2, 3, 4)]
    assert score_episode(build.episode(four, channel(t.final_answer)), t).reward == pytest.approx(1.0, abs=1e-6)
    wasted = [build.call("t1", '{"population": 7}'), build.call("t3", "Porto")]
    assert score_episode(build.episode(four + wasted, channel(t.final_answer)), t).reward == pytest.approx(
        0.8, abs=1e-6
    )
    three = [*four[:3], build.call("t4", "Red Line")]
    assert score_episode(build.episode(three, channel(t.final_answer)), t).reward == pytest.approx(0.75, abs=1e-6)


def test_repeated_identical_calls_cost_precision_and_solve_once(build):
    t = build.target()
    calls = [build.solving_call(i) for i in (1, 2, 3, 4)] + [build.solving_call(1), build.solving_call(1)]
    s = score_episode(build.episode(calls, channel(t.final_answer)), t)
    assert (s.solved, s.calls) == (4, 6)
    assert s.reward == pytest.approx(0.8, abs=1e-6)


def test_parallel_calls_count_one_by_one(build):
    t = build.target()
    calls = [build.solving_call(i, turn=1, index=i - 1) for i in (1, 2, 3, 4)]
    s = score_episode(build.episode(calls, channel(t.final_answer), turns=2), t)
    assert (s.solved, s.calls, s.turns) == (4, 4, 2)
    assert s.reward == pytest.approx(1.0, abs=1e-6)


def test_calls_after_everything_was_solved_still_count(build):
    t = build.target(n_tool=2)
    calls = [build.solving_call(1), build.solving_call(2), build.call("t1", "{}"), build.call("t2", "{}")]
    s = score_episode(build.episode(calls, channel(t.final_answer)), t)
    assert (s.solved, s.calls) == (2, 4)
    assert s.precision == pytest.approx(0.5, abs=1e-6)


def test_answers_only_in_the_models_text_score_zero(build):
    t = build.target()
    log = build.episode([build.call("t1", "no data")], final_answer="1200, 3.75, Lisbon <answer>Blue Line</answer>")
    s = score_episode(log, t)
    assert (s.solved, s.reward, s.recall) == (0, 0.0, 0.0)
    assert s.final_answer_correct  # reported, never rewarded


def test_an_empty_trajectory_scores_zero(build):
    s = score_episode(build.episode([], turns=1), build.target())
    assert (s.reward, s.f1, s.precision, s.recall, s.calls, s.solved) == (0.0, 0.0, 0.0, 0.0, 0, 0)


def test_invalid_calls_count_skipped_calls_do_not(build):
    t = build.target(n_tool=2)
    calls = [
        build.solving_call(1),
        build.solving_call(2),
        build.call(None, "", CallStatus.BAD_JSON),
        build.call("nope", "", CallStatus.UNKNOWN_TOOL),
        build.call("t1", "", CallStatus.SCHEMA_ERROR),
        build.call("t2", "Traceback", CallStatus.TOOL_ERROR),
        build.call("t1", "", CallStatus.SKIPPED, index=9),
        build.call("x", "1200", distractor=True, source_env="env-other"),
    ]
    s = score_episode(build.episode(calls, channel(t.final_answer)), t)
    assert (s.calls, s.invalid_calls, s.tool_errors, s.skipped_calls, s.distractor_calls) == (7, 3, 1, 1, 1)
    assert s.precision == pytest.approx(2 / 7, abs=1e-6)


def test_precision_is_clipped_so_f1_never_exceeds_one(build):
    t = build.target(n_tool=2, leaf="done")
    t.sub_questions[1].tool = "t1"
    log = build.episode([build.call("t1", "population 1200 at rate 3.75")], final_answer=channel("done"))
    s = score_episode(log, t)
    assert (s.solved, s.calls) == (3, 1)
    assert s.precision == 1.0 and s.f1 == pytest.approx(1.0, abs=1e-6)
    # leaves answered without any call: c = 0, eps only guards the division
    s0 = score_episode(build.episode([], final_answer=channel("done")), build.target(n_tool=1, leaf="done"))
    assert s0.precision == 1.0 and s0.recall == 0.5 and 0 < s0.f1 <= 1


def test_the_root_counts_only_when_the_answer_channel_states_it(build):
    """Issues 39 and 48: golden calls followed by a refusal, a wrong answer, a hedge or no channel
    lose the root (q4, whose answer the final answer states); `root_answer=False` is ASTRA's plain F1."""
    t = build.target()
    four = [build.solving_call(i) for i in (1, 2, 3, 4)]
    for final in (
        "I could not determine the answer.",
        channel("Red Line"),
        "",
        "Take the Blue Line.",  # the answer in prose, no channel
        channel("cannot answer: no tool that knows the lines"),
    ):
        s = score_episode(build.episode(four, final), t)
        assert (s.solved, s.final_answer_correct) == (3, False), final
        assert s.f1 == pytest.approx(0.75, abs=1e-5)  # 1 - 1/n: recall and precision 3/4
        assert score_episode(build.episode(four, final), t, root_answer=False).f1 == pytest.approx(1.0, abs=1e-5)
    numeric = build.target(n_tool=2)  # the root is q2, 3.75
    two = [build.solving_call(1), build.solving_call(2)]
    for final, solved in [
        ("The rate is <answer>3.75</answer>.", 2),
        (channel("3.75 or 4.1"), 1),
        (channel("between 3.75 and 4"), 1),
        (channel("3.8"), 1),
    ]:
        assert score_episode(build.episode(two, final), numeric).solved == solved, final


def test_ablation_modes_reward_recall_or_precision(build):
    t = build.target()
    calls = [build.solving_call(1), build.call("t2", "{}"), build.call("t2", "{}"), build.call("t2", "{}")]
    log = build.episode(calls)
    assert score_episode(log, t, RewardMode.RECALL).reward == pytest.approx(0.25)
    assert score_episode(log, t, RewardMode.PRECISION).reward == pytest.approx(0.25, abs=1e-6)
    assert score_episode(log, t, "f1").reward == pytest.approx(0.25, abs=1e-6)


def test_extra_info_is_flat_numeric_and_complete(build):
    info = score_episode(build.episode([build.solving_call(1)]), build.target()).extra_info()
    assert set(info) == {
        "f1", "precision", "recall", "n", "solved", "calls", "invalid_calls", "tool_errors",
        "distractor_calls", "skipped_calls", "turns", "final_answer_correct",
    }  # fmt: skip
    assert all(isinstance(v, float) for v in info.values())


def test_counts_out_of_range_are_refused():
    with pytest.raises(ValueError, match="at least one sub-question"):
        precision_recall_f1(0, 0, 0)
    with pytest.raises(ValueError, match="solved"):
        precision_recall_f1(2, 3, 3)
