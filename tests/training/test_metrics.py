"""Episode step metrics (astra_verl/reward/episode_metrics.py) from reward_extra_info records."""

from __future__ import annotations

import pytest

from astra_verl.reward.episode_metrics import episode_metrics


def info(calls, turns, solved, n=4, invalid=0, distractor=0, errors=0, f1=0.5):
    return {
        "calls": float(calls), "turns": float(turns), "solved": float(solved), "n": float(n),
        "invalid_calls": float(invalid), "distractor_calls": float(distractor), "tool_errors": float(errors),
        "f1": f1, "precision": 0.5, "recall": solved / n, "skipped_calls": 0.0, "final_answer_correct": 1.0,
    }  # fmt: skip


def test_turn_and_call_statistics_and_pooled_rates():
    m = episode_metrics([info(6, 4, 4, invalid=2, distractor=1), info(0, 1, 0), info(2, 3, 2, errors=1)])
    assert m["astra/turns/mean"] == pytest.approx(8 / 3)
    assert (m["astra/turns/max"], m["astra/turns/min"]) == (4.0, 1.0)
    assert m["astra/calls_per_episode/mean"] == pytest.approx(8 / 3)
    assert m["astra/calls_per_episode/max"] == 6.0
    assert m["astra/zero_call_episodes"] == pytest.approx(1 / 3)
    assert m["astra/invalid_call_rate"] == pytest.approx(2 / 8)
    assert m["astra/distractor_call_rate"] == pytest.approx(1 / 8)
    assert m["astra/tool_error_rate"] == pytest.approx(1 / 8)
    assert m["astra/solved_rate"] == pytest.approx(6 / 12)
    assert m["astra/f1/mean"] == pytest.approx(0.5) and m["astra/episodes"] == 3.0


def test_records_of_other_reward_managers_yield_no_metrics():
    assert episode_metrics([{"acc": 1.0}, {}]) == {}
    assert episode_metrics([]) == {}
    m = episode_metrics([info(0, 1, 0)])
    assert m["astra/invalid_call_rate"] == 0.0 and m["astra/zero_call_episodes"] == 1.0
