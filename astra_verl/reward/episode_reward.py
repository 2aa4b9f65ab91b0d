"""What scoring one episode yields, whatever the reward: the scalar GRPO optimises and the counts behind it.

Every astra reward manager (`manager_base.AstraRewardManagerBase`) scores a sample into an
`EpisodeReward` and hands it to verl as `{"reward_score": ..., "reward_extra_info": ...}`. verl
stacks each `extra_info` key over the batch into one array (its validation logs the means per data
source), so a manager reports the same keys, all numbers, for every sample.

The scorers whose details other code reads keep their detailed verdicts and turn them into this
one place each: `f1.EpisodeScore.as_reward()` (solved ids, counts), `bfcl_score.BfclVerdict.as_reward()`
(BFCL's error type and message for the evaluation's results files). τ-bench's scorer
(`astra_verl.benchmarks.tau_reward.score_episode`) returns an `EpisodeReward` itself.
No verl import: the pure scorers build it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EpisodeReward"]


@dataclass(frozen=True)
class EpisodeReward:
    """One episode's reward and the numbers a manager reports beside it (the same keys for every sample)."""

    reward: float
    extra_info: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # verl stacks the values into numeric arrays: a string or None here would surface there, far from its cause
        wrong = {k: type(v).__name__ for k, v in self.extra_info.items() if not isinstance(v, int | float)}
        if not isinstance(self.reward, int | float) or wrong:
            raise TypeError(
                f"an EpisodeReward holds numbers only, got reward {type(self.reward).__name__} and extra_info "
                f"values {wrong}; convert them in the scorer (float(...))"
            )

    def to_verl(self) -> dict[str, Any]:
        """What a verl reward manager's `run_single` returns."""
        return {"reward_score": float(self.reward), "reward_extra_info": dict(self.extra_info)}
