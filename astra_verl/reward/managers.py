"""verl reward managers `astra_f1` (default), `astra_recall`, `astra_precision`.

Thin adapters around `f1.score_episode`: one `run_single` reads the sample's ground truth
(`reward_model.ground_truth`, a `RewardTarget` JSON written by `env_registry export-parquet`) and
its episode log (`tool_extra_fields["astra_episode"]`, written by `astra_tool_agent`), scores it,
and reports the counts in `reward_extra_info` (numeric, the same keys for every sample):
f1, precision, recall, n, solved, calls, invalid_calls, tool_errors, distractor_calls,
skipped_calls, turns, final_answer_correct. `astra_verl.training.batch_filling` turns them into
step metrics; verl's validation logs them itself (`val-aux/<data_source>/<key>/mean@N`).

Select with `reward.reward_manager.name=astra_f1` (source `register`, the default). Registered
when `astra_verl.reward.managers` is imported, which the verl plugin does in every process.
Settings come from the config's `astra.reward` section (`RewardSettings`).

A sample that cannot be scored (no episode log, a malformed one, a ground truth that is not a
`RewardTarget`, an episode from another environment) raises `RewardInputError` naming the
field and the sample: a broken rollout must stop the run, not train on silent zeros.
"""

from __future__ import annotations

from typing import ClassVar

from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from astra_verl.reward.f1 import RewardMode, score_episode
from astra_verl.reward.sample import (
    RewardInputError,
    last_outputs,
    parse_ground_truth,
    parse_target,
    read_sample,
    require_rule_based,
)
from astra_verl.reward.settings import RewardSettings
from astra_verl.trainer_config import select_key

__all__ = [
    "AstraF1RewardManager",
    "AstraPrecisionRewardManager",
    "AstraRecallRewardManager",
    "AstraRewardManager",
    "RewardInputError",
    "RewardSettings",
    "last_outputs",
    "parse_ground_truth",
    "parse_target",
    "read_sample",
    "require_rule_based",
]


class AstraRewardManager(RewardManagerBase):
    """Scores one astra episode; subclasses fix the reward mode."""

    mode: ClassVar[RewardMode] = RewardMode.F1

    def __init__(
        self, config, tokenizer, compute_score, reward_router_address=None, reward_model_tokenizer=None, **kwargs
    ):
        super().__init__(config, tokenizer, compute_score)
        if select_key(config, "reward.custom_reward_function.path"):
            raise ValueError(
                "astra reward managers compute the ASTRA reward themselves and would ignore "
                "reward.custom_reward_function.path; unset it, or use reward.reward_manager.name=naive"
            )
        require_rule_based(config, type(self).__name__)
        self.settings = RewardSettings.from_config(config)

    def score(self, non_tensor: dict) -> dict:
        """Score one sample's non-tensor fields (what `run_single` reads); pure and synchronous."""
        _, target, log = read_sample(non_tensor, parse_target)
        result = score_episode(log, target, self.mode, eps=self.settings.eps, root_answer=self.settings.root_answer)
        return {"reward_score": result.reward, "reward_extra_info": result.extra_info()}

    async def run_single(self, data: DataProto) -> dict:
        return self.score(last_outputs(data))


@register("astra_f1")
class AstraF1RewardManager(AstraRewardManager):
    """ASTRA's trajectory-level F1 of sub-question recall and call precision (the default)."""

    mode = RewardMode.F1


@register("astra_recall")
class AstraRecallRewardManager(AstraRewardManager):
    """Ablation: recall of sub-questions only (ASTRA reports turn explosion with it)."""

    mode = RewardMode.RECALL


@register("astra_precision")
class AstraPrecisionRewardManager(AstraRewardManager):
    """Ablation: call precision only (ASTRA reports turn collapse with it)."""

    mode = RewardMode.PRECISION
