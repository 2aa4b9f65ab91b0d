"""verl reward manager `astra_tau`: τ-bench's reward (`astra_verl.reward.tau`) of a `tau_user` episode.

One `run_single` reads the sample's ground truth (`reward_model.ground_truth`, a `TauTarget`
JSON written by the `tau_bench` family's export) and its episode log, replays the episode's tool
actions (`reward.tau.episode_actions`) in a fresh sandbox session of the task's environment (the
worker's pool, `astra.sandbox`, which must expose `tau_bench` and `env_registry`), reads the
database digest there and scores it against the gold digest and the required outputs (the
agent's messages to the user, from the hook's final state).

`astra.reward.tau_f1_weight` (default 0: τ-bench's reward alone) mixes in our F1 over the gold
actions (`reward.tau.mixed_reward`), for the ablation. `reward_extra_info`: tau_reward,
tau_r_actions, tau_r_outputs, tau_outputs_required, tau_action_f1, tau_calls, tau_turns_after_prompt
(the user's turns after its opening one, which is the prompt's: every hook's count).
Importing this module registers the `tau_user` hook too (the plugin imports it in every process).
The guards (no `reward.custom_reward_function.path`, a rule-based reward), the sample reading and the
hook check are `astra_verl.reward.manager_base.AstraRewardManagerBase`'s; this module declares the
target type, the hook and the scoring function.
"""

from __future__ import annotations

import json
from typing import Any

from verl.experimental.reward_loop.reward_manager import register
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase

from astra_foundation.sandbox import Module, Program, Sandbox
from astra_verl.benchmarks import tau_hook
from astra_verl.calls.call_log import EpisodeLog
from astra_verl.reward.episode_reward import EpisodeReward
from astra_verl.reward.manager_base import AstraRewardManagerBase
from astra_verl.reward.sample import RewardInputError, check_version
from astra_verl.reward.tau import action_f1, episode_actions, mixed_reward, tau_score
from astra_verl.rollout.config import sandbox_settings
from astra_verl.rollout.context import worker_context
from env_registry.families import tau
from env_registry.spec import tool_module

NAME = "astra_tau"


def target_program(target: tau.TauTarget) -> Program:
    """The sandbox program of the target's environment (its tools are the domain's, named for its id)."""
    domain = target.task.split("/")[0]
    return Program(tuple(Module(tool_module(t.name, target.env_id), t.source) for t in tau.tool_specs(domain)))


async def replay_digest(sandbox: Sandbox, target: tau.TauTarget, actions: list[tuple[str, dict[str, Any]]]) -> str:
    """The database digest after `actions`, replayed in a fresh session of the target's environment."""
    session = await sandbox.open_session(target_program(target))
    try:
        for name, kwargs in actions:
            result = await sandbox.call(session, tool_module(name, target.env_id), name, kwargs)
            if not result.ok:
                raise RewardInputError(f"{target.task}: replaying {name} failed in the sandbox: {result.text}")
        result = await sandbox.call(session, tool_module(tau.STATE_TOOL, target.env_id), tau.STATE_TOOL, {})
        if not result.ok:
            raise RewardInputError(f"{target.task}: the database digest failed in the sandbox: {result.text}")
        return result.output
    finally:
        await sandbox.close_session(session)


async def score_episode(
    sandbox: Sandbox, target: tau.TauTarget, log: EpisodeLog, f1_weight: float = 0.0
) -> EpisodeReward:
    """τ-bench's reward of one episode (mixed with our F1 over the gold actions by `f1_weight`) and its counts."""
    actions = episode_actions(log.calls, target.terminate_tools)
    digest = await replay_digest(sandbox, target, actions)
    responses = [str(r) for r in log.hook_state.get("responses", [])]
    score = tau_score(digest, target.gold_digest, target.outputs, responses)
    gold = [(a["name"], a["kwargs"]) for a in json.loads(target.actions)]
    _, _, f1 = action_f1(actions, gold)
    info = {
        **score.extra_info(),
        "tau_action_f1": f1,
        "tau_calls": float(log.num_calls),
        "tau_turns_after_prompt": float(log.user_turns),  # the user's turns after its opening one
    }
    return EpisodeReward(mixed_reward(score, f1, f1_weight), info)


@register(NAME)
class AstraTauRewardManager(AstraRewardManagerBase, RewardManagerBase):
    """See the module docstring."""

    name = NAME
    target_type = tau.TauTarget
    export_hint = "export τ-bench rows with `python -m astra_verl.eval tau-export`"
    hook = tau_hook.HOOK_NAME

    def __init__(self, config, tokenizer, compute_score, **kwargs):
        super().__init__(config, tokenizer, compute_score, **kwargs)
        self.sandbox_config = sandbox_settings(config)
        missing = [p for p in tau.SANDBOX["packages"] if p not in self.sandbox_config.packages]
        if missing:
            raise ValueError(
                f"{NAME} replays τ-bench's tools in the sandbox, whose packages lack {missing}: add them to "
                "astra.sandbox.packages"
            )

    @staticmethod
    def check_target(target: tau.TauTarget) -> None:
        check_version("TauTarget", target.version, tau.TARGET_VERSION)

    async def score_episode(self, target: tau.TauTarget, log: EpisodeLog) -> EpisodeReward:
        sandbox = worker_context().sandbox(self.sandbox_config)
        return await score_episode(sandbox, target, log, self.settings.tau_f1_weight)


def parse_target(ground_truth: Any) -> tau.TauTarget:
    """A row's `reward_model.ground_truth` as astra_tau reads it (a checked `TauTarget`; `eval tau` reads it too)."""
    return AstraTauRewardManager.parse_target(ground_truth)
