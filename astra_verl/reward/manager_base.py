"""The one base of every astra reward manager: `astra_f1`, `astra_recall`, `astra_precision`
(`managers`), `astra_bfcl` and `astra_tau` (`astra_verl.benchmarks.bfcl_reward`, `.tau_reward`).

What every one of them does is written here once:

- construction refuses a config that would bypass the manager or that it would silently ignore:
  `reward.custom_reward_function.path` (verl hands that function to the manager, which never calls
  it) and `reward.reward_model.enable` (verl's reward loop would score with the model instead); it
  reads the `astra.reward` settings (`RewardSettings`, unknown keys refused);
- `score` reads a sample (`sample.read_sample`): its `reward_model.ground_truth` parsed into the
  manager's `target_type` and checked by its `check_target`, its episode log, the check that the
  episode ran with the manager's `hook` and in the ground truth's environment. A sample that fails
  any of these raises `RewardInputError` naming it: a broken rollout stops the run instead of
  training on silent zeros. Then the subclass's `score_episode(target, log)` returns an
  `EpisodeReward`, which `run_single` hands verl.

A subclass declares its data as class attributes (`name`, `target_type`, `export_hint`, `hook`,
`check_target`) and its scoring function (`score_episode`); nothing here branches on which
manager it is.

Why a mixin and not a subclass of verl's `RewardManagerBase`: this module is shared by the
registering modules, and by the plugin's import rule (`astra_verl.plugin`) a shared module must not
import verl. Each concrete manager therefore lists both bases, this one first:
`class AstraBfclRewardManager(AstraRewardManagerBase, RewardManagerBase)`, and registers itself
under its `name` with verl's `@register`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from astra_verl.calls.call_log import EpisodeLog
from astra_verl.reward.episode_reward import EpisodeReward
from astra_verl.reward.sample import (
    last_outputs,
    parse_ground_truth,
    read_sample,
    refuse_custom_reward_function,
    require_rule_based,
)
from astra_verl.reward.settings import RewardSettings

if TYPE_CHECKING:
    from verl import DataProto

__all__ = ["AstraRewardManagerBase"]


class AstraRewardManagerBase(ABC):
    """The shared guards, sample reading and verl hand-off of the astra reward managers (module docstring)."""

    name: ClassVar[str]  # the name verl's registry holds it under (reward.reward_manager.name)
    target_type: ClassVar[type[BaseModel]]  # what reward_model.ground_truth parses into; it has an env_id
    export_hint: ClassVar[str]  # what to do when a row's ground truth is not a target_type
    hook: ClassVar[str | None] = None  # the hook every scored episode must have run with; None: any

    def __init__(
        self, config, tokenizer, compute_score, reward_router_address=None, reward_model_tokenizer=None, **kwargs
    ):
        # Refused before verl's own set-up: a wrong config must fail without side effects.
        refuse_custom_reward_function(config, self.name)
        require_rule_based(config, self.name)
        super().__init__(config, tokenizer, compute_score)  # verl's RewardManagerBase, next in the MRO
        self.settings = RewardSettings.from_config(config)

    @staticmethod
    @abstractmethod
    def check_target(target: Any) -> None:
        """Raise RewardInputError on a parsed target this reader cannot score (a version it does not know)."""

    @classmethod
    def parse_target(cls, ground_truth: Any) -> Any:
        """A row's `reward_model.ground_truth` (JSON or its decoded dict) as the manager's `target_type`."""
        target = parse_ground_truth(ground_truth, cls.target_type, cls.export_hint)
        cls.check_target(target)
        return target

    @abstractmethod
    async def score_episode(self, target: Any, log: EpisodeLog) -> EpisodeReward:
        """The reward of one episode against its parsed target (the subclass's scoring function)."""

    async def score(self, non_tensor: dict) -> EpisodeReward:
        """Score one sample's non-tensor fields (what `run_single` reads; `eval envs` calls it directly)."""
        _, target, log = read_sample(non_tensor, self.parse_target, self.hook)
        return await self.score_episode(target, log)

    async def run_single(self, data: DataProto) -> dict:
        return (await self.score(last_outputs(data))).to_verl()
