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
`BfclTarget`, an episode run without the BFCL hook) raises `RewardInputError`. The guards (no
`reward.custom_reward_function.path`, a rule-based reward), the sample reading and the hook check
are `astra_verl.reward.manager_base.AstraRewardManagerBase`'s; this module declares the target type,
the hook and the scoring function.
"""

from __future__ import annotations

from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from astra_verl.benchmarks import bfcl_hook, bfcl_score
from astra_verl.calls.call_log import EpisodeLog
from astra_verl.reward.episode_reward import EpisodeReward
from astra_verl.reward.manager_base import AstraRewardManagerBase
from astra_verl.reward.sample import check_version
from astra_verl.rollout.context import worker_context
from env_registry.families.bfcl import TARGET_VERSION, BfclTarget

NAME = "astra_bfcl"


@register(NAME)
class AstraBfclRewardManager(AstraRewardManagerBase, RewardManagerBase):
    """See the module docstring."""

    name = NAME
    target_type = BfclTarget
    export_hint = "export BFCL rows with `python -m astra_verl.eval bfcl-export`"
    hook = bfcl_hook.HOOK_NAME

    def __init__(self, config, tokenizer, compute_score, **kwargs):
        super().__init__(config, tokenizer, compute_score, **kwargs)
        self.sandbox_config = bfcl_score.trainer_sandbox_config(config)
        bfcl_score.check_sandbox_config(self.sandbox_config)

    @staticmethod
    def check_target(target: BfclTarget) -> None:
        check_version("BfclTarget", target.version, TARGET_VERSION)

    async def score_episode(self, target: BfclTarget, log: EpisodeLog) -> EpisodeReward:
        verdict = await bfcl_score.score_episode(worker_context().sandbox(self.sandbox_config), target, log)
        return verdict.as_reward()
