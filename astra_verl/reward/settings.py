"""The `astra.reward` settings, verl-free: the reward managers (`managers`, registered when verl
loads the plugin) and `astra_verl.benchmarks.tau_reward` (registered the same way) both read them, and
a registering module must not import another (astra_verl/plugin.py, "Import rule")."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from astra_foundation.strict import StrictModel
from astra_verl.reward.f1 import DEFAULT_EPS
from astra_verl.trainer_config import select_key

__all__ = ["RewardSettings"]


class RewardSettings(StrictModel):
    """The `astra.reward` section of a recipe."""

    section = "astra.reward"

    eps: float = Field(DEFAULT_EPS, gt=0)  # guards precision's n_hat / (c + eps) at c = 0
    # The root sub-question counts only when the final answer's channel states its answer (docs/reward.md);
    # False is ASTRA's plain F1, for ablations.
    root_answer: bool = True
    # astra_tau only (astra_verl.benchmarks.tau_reward): the weight of our F1 mixed into τ-bench's reward
    tau_f1_weight: float = Field(0.0, ge=0, le=1)

    @classmethod
    def from_config(cls, config: Any) -> RewardSettings:
        return cls.from_mapping(select_key(config, "astra.reward"))
