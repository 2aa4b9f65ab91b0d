"""verl reward managers `astra_f1` (default), `astra_recall`, `astra_precision`.

Thin subclasses of `manager_base.AstraRewardManagerBase` (which refuses configs that would bypass
them, reads the sample and hands verl the result) around `f1.score_episode`: the ground truth is a
`RewardTarget` JSON written by `env_registry export-parquet`, the episode log the one
`astra_tool_agent` writes (any hook). `reward_extra_info` holds the counts of `EpisodeScore.extra_info`
(numeric, the same keys for every sample): f1, precision, recall, n, solved, calls, invalid_calls,
tool_errors, distractor_calls, skipped_calls, turns, final_answer_correct.
`astra_verl.training.batch_filling` turns them into step metrics; verl's validation logs them itself
(`val-aux/<data_source>/<key>/mean@N`).

Select with `reward.reward_manager.name=astra_f1` (source `register`, the default). Registered
when `astra_verl.reward.managers` is imported, which the verl plugin does in every process.
Settings come from the config's `astra.reward` section (`RewardSettings`).

A sample that cannot be scored (no episode log, a malformed one, a ground truth that is not a
`RewardTarget`, an episode from another environment) raises `RewardInputError` naming the
field and the sample: a broken rollout must stop the run, not train on silent zeros.
"""

from __future__ import annotations

from typing import ClassVar

from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from astra_verl.calls.call_log import EpisodeLog
from astra_verl.reward import f1
from astra_verl.reward.episode_reward import EpisodeReward
from astra_verl.reward.f1 import RewardMode
from astra_verl.reward.manager_base import AstraRewardManagerBase
from astra_verl.reward.sample import (
    REWARD_TARGET_EXPORT,
    RewardInputError,
    check_reward_target,
    last_outputs,
    parse_ground_truth,
    parse_target,
    read_sample,
    require_rule_based,
)
from astra_verl.reward.settings import RewardSettings
from env_registry.spec import RewardTarget

__all__ = [
    "AstraF1RewardManager",
    "AstraPrecisionRewardManager",
    "AstraRecallRewardManager",
    "AstraRewardManager",
    "AstraRewardManagerBase",
    "RewardInputError",
    "RewardSettings",
    "last_outputs",
    "parse_ground_truth",
    "parse_target",
    "read_sample",
    "require_rule_based",
]


class AstraRewardManager(AstraRewardManagerBase, RewardManagerBase):
    """Scores one astra episode with ASTRA's F1 or an ablation of it; subclasses fix the mode."""

    name: ClassVar[str] = "astra_f1"
    mode: ClassVar[RewardMode] = RewardMode.F1
    target_type = RewardTarget
    export_hint = REWARD_TARGET_EXPORT
    check_target = staticmethod(check_reward_target)

    async def score_episode(self, target: RewardTarget, log: EpisodeLog) -> EpisodeReward:
        settings = self.settings
        return f1.score_episode(log, target, self.mode, eps=settings.eps, root_answer=settings.root_answer).as_reward()


@register("astra_f1")
class AstraF1RewardManager(AstraRewardManager):
    """ASTRA's trajectory-level F1 of sub-question recall and call precision (the default)."""

    name = "astra_f1"
    mode = RewardMode.F1


@register("astra_recall")
class AstraRecallRewardManager(AstraRewardManager):
    """Ablation: recall of sub-questions only (ASTRA reports turn explosion with it)."""

    name = "astra_recall"
    mode = RewardMode.RECALL


@register("astra_precision")
class AstraPrecisionRewardManager(AstraRewardManager):
    """Ablation: call precision only (ASTRA reports turn collapse with it)."""

    name = "astra_precision"
    mode = RewardMode.PRECISION
