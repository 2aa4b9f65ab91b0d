"""Step metrics of the astra episodes a training batch holds (pure).

verl 0.9.1's trainer logs nothing of `reward_extra_info` for training steps (the v1
`PPOTrainer._compute_metrics` reads only scores, lengths and `num_turns`; validation alone turns
it into `val-aux/...`). The failure modes of multi-turn tool RL show in these numbers first:
turn collapse (`astra/turns/mean` falling, `astra/zero_call_episodes` rising), call explosion
(`astra/calls_per_episode/mean` and `astra/turns/max` climbing), spam of malformed or
irrelevant calls (`astra/invalid_call_rate`, `astra/distractor_call_rate`). The sampler
(`astra_verl.training.sampler`) computes them for every step's batch and hands them to the
trainer with its own metrics, the one channel verl merges into the logged step metrics.

Rates are pooled over the batch (sum of counts / sum of calls), means are per episode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["episode_metrics"]

_MEANS = ("f1", "precision", "recall", "final_answer_correct", "skipped_calls")


def episode_metrics(infos: Sequence[Mapping[str, float]], prefix: str = "astra") -> dict[str, float]:
    """Aggregate per-episode `reward_extra_info` records (as `EpisodeScore.extra_info` writes them).

    Records without the astra keys (another reward manager) are skipped; no records, no metrics.
    """
    rows = [r for r in infos if isinstance(r, Mapping) and "calls" in r and "turns" in r and "n" in r]
    if not rows:
        return {}
    count = len(rows)

    def total(key: str) -> float:
        return float(sum(float(r[key]) for r in rows))  # every astra record has every key (EpisodeScore.extra_info)

    calls = [float(r["calls"]) for r in rows]
    turns = [float(r["turns"]) for r in rows]
    all_calls = sum(calls)
    out = {
        "turns/mean": sum(turns) / count,
        "turns/max": max(turns),
        "turns/min": min(turns),
        "calls_per_episode/mean": all_calls / count,
        "calls_per_episode/max": max(calls),
        "zero_call_episodes": sum(1 for c in calls if c == 0) / count,
        "invalid_call_rate": total("invalid_calls") / all_calls if all_calls else 0.0,
        "distractor_call_rate": total("distractor_calls") / all_calls if all_calls else 0.0,
        "tool_error_rate": total("tool_errors") / all_calls if all_calls else 0.0,
        "solved_rate": total("solved") / total("n") if total("n") else 0.0,
        "episodes": float(count),
    }
    for key in _MEANS:
        if key in rows[0]:
            out[f"{key}/mean"] = total(key) / count
    return {f"{prefix}/{k}": v for k, v in out.items()}
