"""verl reward manager `astra_bfcl`: BFCL's multi-turn checker as the reward (1 valid, 0 not).

One `run_single` reads the sample's ground truth (`reward_model.ground_truth`, a `BfclTarget`
JSON written by `python -m astra_verl.eval bfcl-export`) and its episode log
(`tool_extra_fields["astra_episode"]`, written by `astra_tool_agent` with the `bfcl_multi_turn`
hook), and asks BFCL's checker for a verdict in a fresh sandbox session (`bfcl_score`: the
checker re-executes model-written calls, so it never runs in this process). The pool is the
process's `shared_sandbox` for `astra.sandbox`, which must expose `bfcl_eval` and `mpmath`
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

from functools import lru_cache
from typing import Any

from omegaconf import DictConfig, OmegaConf
from pydantic import ValidationError
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from astra_verl.eval import bfcl_hook
from astra_verl.eval.bfcl_score import check_sandbox_config, score_episode, trainer_sandbox_config
from astra_verl.reward.managers import RewardInputError
from astra_verl.rollout.call_log import CallLogError, EpisodeLog
from env_registry.families.bfcl import TARGET_VERSION, BfclTarget

NAME = "astra_bfcl"


def _select(config: Any, key: str) -> Any:
    if isinstance(config, DictConfig):
        return OmegaConf.select(config, key, default=None)
    return None


@lru_cache(maxsize=4096)
def _parse_target_json(text: str) -> BfclTarget:
    return BfclTarget.model_validate_json(text)  # the G rollouts of a prompt share one string


def parse_target(ground_truth: Any) -> BfclTarget:
    try:
        if isinstance(ground_truth, bytes):
            ground_truth = ground_truth.decode("utf-8")
        if isinstance(ground_truth, str):
            target = _parse_target_json(ground_truth)
        elif isinstance(ground_truth, dict):
            target = BfclTarget.model_validate(ground_truth)
        else:
            raise RewardInputError(
                f"reward_model.ground_truth must be BfclTarget JSON, got {type(ground_truth).__name__}"
            )
    except ValidationError as exc:
        raise RewardInputError(
            f"reward_model.ground_truth is not a BfclTarget ({exc.errors()[0]['msg']} at "
            f"{'.'.join(map(str, exc.errors()[0]['loc'])) or '<root>'}); export BFCL rows with "
            "`python -m astra_verl.eval bfcl-export`"
        ) from exc
    if target.version != TARGET_VERSION:
        raise RewardInputError(f"BfclTarget version {target.version}; this reader knows {TARGET_VERSION}")
    return target


@register(NAME)
class AstraBfclRewardManager(RewardManagerBase):
    """See the module docstring."""

    def __init__(
        self, config, tokenizer, compute_score, reward_router_address=None, reward_model_tokenizer=None, **kwargs
    ):
        super().__init__(config, tokenizer, compute_score)
        if _select(config, "reward.reward_model.enable"):
            raise ValueError(f"{NAME} is rule-based: set reward.reward_model.enable=False")
        self.sandbox_config = trainer_sandbox_config(config)
        check_sandbox_config(self.sandbox_config)

    async def score(self, non_tensor: dict) -> dict:
        where = f"sample data_source={non_tensor.get('data_source')!r} uid={non_tensor.get('uid')!r}"
        reward_model = non_tensor.get("reward_model")
        if not isinstance(reward_model, dict) or "ground_truth" not in reward_model:
            raise RewardInputError(f"{where}: reward_model.ground_truth is missing")
        try:
            target = parse_target(reward_model["ground_truth"])
            log = EpisodeLog.from_extra_fields(non_tensor.get("tool_extra_fields"))
        except (RewardInputError, CallLogError) as exc:
            raise RewardInputError(f"{where}: {exc}") from exc
        if log.hook != bfcl_hook.HOOK_NAME:
            raise RewardInputError(
                f"{where}: the episode ran with hook {log.hook!r}, not {bfcl_hook.HOOK_NAME!r}; BFCL rows carry "
                "extra_info.interaction_kwargs.name=bfcl_multi_turn"
            )
        if log.env_id != target.env_id:
            raise RewardInputError(
                f"{where}: the episode ran env {log.env_id!r}, the ground truth is for {target.env_id!r}"
            )
        from astra_verl.sandbox import shared_sandbox

        verdict = await score_episode(shared_sandbox(self.sandbox_config), target, log)
        return {"reward_score": float(verdict.valid), "reward_extra_info": verdict.extra_info()}

    async def run_single(self, data: DataProto) -> dict:
        if len(data) == 0:
            raise RewardInputError("run_single got an empty DataProto")
        return await self.score({key: values[-1] for key, values in data.non_tensor_batch.items()})
