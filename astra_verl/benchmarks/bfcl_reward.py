"""verl reward manager `astra_bfcl`: BFCL's multi-turn checker as the reward (1 valid, 0 not).

One `run_single` reads the sample's ground truth (`reward_model.ground_truth`, a `BfclTarget`
JSON written by `python -m astra_verl.eval bfcl-export`) and its episode log
(`tool_extra_fields["astra_episode"]`, written by `astra_tool_agent` with the `bfcl_multi_turn`
hook), and asks BFCL's checker for a verdict in a fresh sandbox session (`bfcl_score`: the
checker re-executes model-written calls, so it never runs in this process). The pool is the
worker's (`astra_verl.rollout.context.worker_context`) for `astra.sandbox`, which must expose `bfcl_eval` and `mpmath`
(`astra.sandbox.packages`); construction fails otherwise.

`reward_extra_info` (numeric, the same keys for every sample; verl's validation logs them per
data source, i.e. per BFCL category): bfcl_valid, bfcl_force_quit, bfcl_truncated,
bfcl_state_mismatch, bfcl_response_mismatch, bfcl_empty_turn, bfcl_checker_error, bfcl_turns,
bfcl_steps, bfcl_calls.

Importing this module also registers the `bfcl_multi_turn` hook (the plugin imports it in every
process). A sample that cannot be scored (no episode log, a ground truth that is not a
`BfclTarget`, an episode run without the BFCL hook) raises `RewardInputError`.
"""

from __future__ import annotations

from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from astra_verl.benchmarks import bfcl_hook
from astra_verl.benchmarks.bfcl_score import check_sandbox_config, score_episode, trainer_sandbox_config
from astra_verl.calls.call_log import EpisodeLog
from astra_verl.reward.sample import (
    RewardInputError,
    last_outputs,
    parse_ground_truth,
    read_sample,
    require_rule_based,
)
from astra_verl.rollout.context import worker_context
from env_registry.families.bfcl import TARGET_VERSION, BfclTarget

NAME = "astra_bfcl"


def parse_target(ground_truth: Any) -> BfclTarget:
    target = parse_ground_truth(
        ground_truth, BfclTarget, "export BFCL rows with `python -m astra_verl.eval bfcl-export`"
    )
    if target.version != TARGET_VERSION:
        raise RewardInputError(f"BfclTarget version {target.version}; this reader knows {TARGET_VERSION}")
    return target


def _check_hook(where: str, log: EpisodeLog) -> None:
    if log.hook != bfcl_hook.HOOK_NAME:
        raise RewardInputError(
            f"{where}: the episode ran with hook {log.hook!r}, not {bfcl_hook.HOOK_NAME!r}; BFCL rows carry "
            "extra_info.interaction_kwargs.name=bfcl_multi_turn"
        )


@register(NAME)
class AstraBfclRewardManager(RewardManagerBase):
    """See the module docstring."""

    def __init__(
        self, config, tokenizer, compute_score, reward_router_address=None, reward_model_tokenizer=None, **kwargs
    ):
        super().__init__(config, tokenizer, compute_score)
        require_rule_based(config, NAME)
        self.sandbox_config = trainer_sandbox_config(config)
        check_sandbox_config(self.sandbox_config)

    async def score(self, non_tensor: dict) -> dict:
        _, target, log = read_sample(non_tensor, parse_target, _check_hook)
        verdict = await score_episode(worker_context().sandbox(self.sandbox_config), target, log)
        return {"reward_score": float(verdict.valid), "reward_extra_info": verdict.extra_info()}

    async def run_single(self, data: DataProto) -> dict:
        return await self.score(last_outputs(data))
