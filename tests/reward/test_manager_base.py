"""Every registered astra reward manager behaves the same where `AstraRewardManagerBase` decides:
the config guards, reading the ground truth into its target type, the hook and environment checks,
and the `EpisodeReward` it hands verl. Scoring itself is faked (BFCL's and τ-bench's need a
sandbox; their own tests score for real)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

from astra_verl.benchmarks.bfcl_score import BfclVerdict
from astra_verl.calls.call_log import EpisodeLog
from astra_verl.plugin import REGISTERING_MODULES
from astra_verl.reward.episode_reward import EpisodeReward
from astra_verl.reward.f1 import score_episode
from astra_verl.reward.manager_base import AstraRewardManagerBase
from astra_verl.reward.sample import RewardInputError
from env_registry.families.bfcl import BfclTarget
from env_registry.families.tau import TauTarget
from env_registry.spec import RewardTarget

for _module in REGISTERING_MODULES:  # as the plugin does in every verl process
    importlib.import_module(_module)

ENV = "env-trip"
MANAGERS = sorted(name for name, cls in REWARD_MANAGER.items() if issubclass(cls, AstraRewardManagerBase))
CONFIG = OmegaConf.create(
    {
        "reward": {"custom_reward_function": {"path": None}, "reward_model": {"enable": False}},
        # every manager's sandbox needs (BFCL's checker, τ-bench's tools); no pool starts here
        "astra": {"reward": {}, "sandbox": {"packages": ["bfcl_eval", "mpmath", "tau_bench", "env_registry"]}},
    }
)


def example_target(target_type: type, build) -> RewardTarget | BfclTarget | TauTarget:
    """A valid target of each type the managers read, for env `ENV`."""
    examples = {
        RewardTarget: build.target,
        BfclTarget: lambda: BfclTarget(
            bfcl_version="0",
            id="multi_turn_base_0",
            category="base",
            env_id=ENV,
            involved_classes=["MathAPI"],
            initial_config={},
            ground_truth=[["mean(numbers=[1, 2])"]],
        ),
        TauTarget: lambda: TauTarget(
            tau_bench_version="0",
            task="retail/test/0",
            env_id=ENV,
            gold_digest="d",
            outputs=[],
            terminate_tools=["transfer_to_human_agents"],
            actions="[]",
        ),
    }
    return examples[target_type]()


def make(name: str, config=CONFIG):
    return REWARD_MANAGER[name](config=config, tokenizer=None, compute_score=None, reward_router_address=None)


def non_tensor(ground_truth, log: EpisodeLog | None) -> dict:
    """One sample's non-tensor fields as `last_outputs` hands them to `score`."""
    return {
        "uid": "u-1",
        "data_source": "astra/any",
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {"index": 7},
        "tool_extra_fields": None if log is None else log.to_extra_fields(),
    }


def episode(cls: type[AstraRewardManagerBase], *, env_id: str = ENV, hook: str | None = None) -> EpisodeLog:
    """An episode as the manager expects it: its hook (any, here `astra_default`, where it names none)."""
    return EpisodeLog(env_id=env_id, hook=hook or cls.hook or "astra_default", final_answer="done")


def score(manager, fields: dict) -> EpisodeReward:
    return manager.loop.run_until_complete(manager.score(fields))


class FakeScorer:
    """Stands in for a manager's scoring function: records what it was handed, returns a fixed reward."""

    def __init__(self):
        self.seen: list[tuple[object, EpisodeLog]] = []

    async def __call__(self, target, log):
        self.seen.append((target, log))
        return EpisodeReward(0.5, {"a": 1.0, "b": 0.0})


def test_every_astra_manager_is_parametrized_here():
    assert MANAGERS == ["astra_bfcl", "astra_f1", "astra_precision", "astra_recall", "astra_tau"]


@pytest.mark.parametrize("name", MANAGERS)
def test_each_manager_is_registered_under_its_name(name):
    assert REWARD_MANAGER[name].name == name


@pytest.mark.parametrize("name", MANAGERS)
def test_a_custom_reward_function_is_refused_naming_the_key_and_the_way_out(name):
    config = OmegaConf.merge(CONFIG, {"reward": {"custom_reward_function": {"path": "my_reward.py"}}})
    with pytest.raises(ValueError, match="reward.custom_reward_function.path='my_reward.py'") as err:
        make(name, config)
    assert name in str(err.value) and "silently ignore" in str(err.value)
    assert "unset reward.custom_reward_function.path" in str(err.value)


@pytest.mark.parametrize("name", MANAGERS)
def test_a_reward_model_is_refused_the_reward_is_rule_based(name):
    config = OmegaConf.merge(CONFIG, {"reward": {"reward_model": {"enable": True}}})
    with pytest.raises(ValueError, match="set reward.reward_model.enable=False") as err:
        make(name, config)
    assert name in str(err.value)


@pytest.mark.parametrize("name", MANAGERS)
def test_unknown_astra_reward_settings_are_refused(name):
    with pytest.raises(ValueError, match="unknown keys \\['epsilon'\\]"):
        make(name, OmegaConf.merge(CONFIG, {"astra": {"reward": {"epsilon": 0.1}}}))


@pytest.mark.parametrize("name", MANAGERS)
@pytest.mark.parametrize("decoded", [False, True], ids=["json", "dict"])
def test_a_sample_is_read_into_the_target_type_and_scored_by_the_managers_function(name, decoded, build):
    manager, fake = make(name), FakeScorer()
    manager.score_episode = fake
    target = example_target(manager.target_type, build)
    log = episode(type(manager))
    ground_truth = target.model_dump() if decoded else target.model_dump_json()
    assert score(manager, non_tensor(ground_truth, log)) == EpisodeReward(0.5, {"a": 1.0, "b": 0.0})
    ((seen_target, seen_log),) = fake.seen
    assert seen_target == target and type(seen_target) is manager.target_type
    assert seen_log.env_id == ENV and seen_log.hook == log.hook


@pytest.mark.parametrize("name", MANAGERS)
def test_run_single_hands_verl_the_reward_and_its_extra_info(name, build):
    manager = make(name)
    manager.score_episode = FakeScorer()
    fields = non_tensor(example_target(manager.target_type, build).model_dump_json(), episode(type(manager)))
    prompts, responses = torch.tensor([[5, 6]]), torch.tensor([[8]])
    batch = TensorDict(
        {"prompts": prompts, "responses": responses, "attention_mask": torch.ones(1, 3, dtype=torch.int64)},
        batch_size=1,
    )
    column = {}
    for key, value in fields.items():
        column[key] = np.empty(1, dtype=object)
        column[key][0] = value
    out = manager.loop.run_until_complete(manager.run_single(DataProto(batch=batch, non_tensor_batch=column)))
    assert out == {"reward_score": 0.5, "reward_extra_info": {"a": 1.0, "b": 0.0}}


@pytest.mark.parametrize("name", MANAGERS)
def test_a_missing_ground_truth_is_refused_naming_the_sample(name):
    fields = non_tensor(None, episode(REWARD_MANAGER[name]))
    del fields["reward_model"]["ground_truth"]
    with pytest.raises(RewardInputError, match="reward_model.ground_truth is missing") as err:
        score(make(name), fields)
    assert "uid='u-1' index=7" in str(err.value)


@pytest.mark.parametrize("name", MANAGERS)
def test_a_ground_truth_of_another_type_is_refused_with_the_managers_export(name, build):
    manager = make(name)
    other = next(t for t in (RewardTarget, BfclTarget, TauTarget) if t is not manager.target_type)
    fields = non_tensor(example_target(other, build).model_dump_json(), episode(type(manager)))
    with pytest.raises(RewardInputError, match=f"is not a {manager.target_type.__name__}") as err:
        score(manager, fields)
    assert manager.export_hint in str(err.value) and "uid='u-1'" in str(err.value)


@pytest.mark.parametrize("name", MANAGERS)
def test_a_ground_truth_of_an_unknown_version_is_refused(name, build):
    manager = make(name)
    target = example_target(manager.target_type, build)
    field = "spec_version" if isinstance(target, RewardTarget) else "version"
    fields = non_tensor(target.model_copy(update={field: 99}).model_dump_json(), episode(type(manager)))
    with pytest.raises(RewardInputError, match="version 99"):
        score(manager, fields)


@pytest.mark.parametrize("name", MANAGERS)
def test_an_episode_without_a_log_is_refused(name, build):
    manager = make(name)
    with pytest.raises(RewardInputError, match="tool_extra_fields is missing"):
        score(manager, non_tensor(example_target(manager.target_type, build).model_dump_json(), None))


@pytest.mark.parametrize("name", MANAGERS)
def test_an_episode_of_another_hook_is_refused_where_the_manager_names_one(name, build):
    manager, fake = make(name), FakeScorer()
    manager.score_episode = fake
    ground_truth = example_target(manager.target_type, build).model_dump_json()
    fields = non_tensor(ground_truth, episode(type(manager), hook="some_other_hook"))
    if manager.hook is None:  # astra_f1 and its ablations score episodes of any hook
        score(manager, fields)
        assert len(fake.seen) == 1
        return
    with pytest.raises(RewardInputError, match=f"hook 'some_other_hook', not '{manager.hook}'") as err:
        score(manager, fields)
    assert f"extra_info.interaction_kwargs.name={manager.hook}" in str(err.value) and not fake.seen


@pytest.mark.parametrize("name", MANAGERS)
def test_an_episode_of_another_environment_is_refused(name, build):
    manager = make(name)
    fields = non_tensor(
        example_target(manager.target_type, build).model_dump_json(), episode(type(manager), env_id="env-elsewhere")
    )
    with pytest.raises(RewardInputError, match="ran env 'env-elsewhere' but reward_model.ground_truth is for env"):
        score(manager, fields)


def test_an_episode_reward_holds_numbers_only():
    assert EpisodeReward(1, {"x": True}).to_verl() == {"reward_score": 1.0, "reward_extra_info": {"x": True}}
    with pytest.raises(TypeError, match="extra_info values \\{'x': 'str'\\}"):
        EpisodeReward(1.0, {"x": "1"})
    with pytest.raises(TypeError, match="reward NoneType"):
        EpisodeReward(None, {})  # type: ignore[arg-type]


def test_the_detailed_verdicts_become_episode_rewards_with_their_extra_info(build):
    t = build.target()
    scored = score_episode(build.episode([build.solving_call(1)]), t)
    assert scored.as_reward() == EpisodeReward(scored.reward, scored.extra_info())
    for verdict in (BfclVerdict(valid=True), BfclVerdict(valid=False, error_type="astra:episode_truncated")):
        reward = verdict.as_reward()
        assert reward.reward == float(verdict.valid) and reward.extra_info == verdict.extra_info()
