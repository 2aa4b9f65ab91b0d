"""The verl reward managers: registered, built the way verl builds them, scoring verl-shaped samples."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

from astra_verl.calls.call_log import EpisodeLog
from astra_verl.reward.managers import AstraF1RewardManager, RewardInputError, RewardSettings
from env_registry.answer_channel import channel

CONFIG = OmegaConf.create(
    {"reward": {"custom_reward_function": {"path": None}, "reward_model": {"enable": False}}, "astra": {"reward": {}}}
)


def sample(log: EpisodeLog | dict | None, ground_truth, *, uid: str = "u-1") -> DataProto:
    """One trajectory as verl's agent loop hands it to a reward worker (`AgentLoopWorker._compute_score`)."""
    prompts, responses = torch.tensor([[5, 6, 7]]), torch.tensor([[8, 9]])
    extra_fields = log.to_extra_fields() if isinstance(log, EpisodeLog) else log
    tool_extra = np.empty(1, dtype=object)
    tool_extra[0] = extra_fields
    batch = TensorDict(
        {
            "prompts": prompts,
            "responses": responses,
            "attention_mask": torch.ones(1, 5, dtype=torch.int64),
            "input_ids": torch.cat([prompts, responses], dim=1),
        },
        batch_size=1,
    )
    non_tensor = {
        "uid": np.array([uid], dtype=object),
        "data_source": np.array(["astra/travel"], dtype=object),
        "reward_model": np.array([{"style": "rule", "ground_truth": ground_truth}], dtype=object),
        "extra_info": np.array([{"index": 7, "split": "train"}], dtype=object),
        "__num_turns__": np.array([3]),
        "tool_extra_fields": tool_extra,
    }
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


def run(manager, data):
    return manager.loop.run_until_complete(manager.run_single(data))


def make(name: str = "astra_f1", config=CONFIG):
    return get_reward_manager_cls(name)(config=config, tokenizer=None, compute_score=None, reward_router_address=None)


def test_managers_are_registered_under_their_names():
    assert get_reward_manager_cls("astra_f1") is AstraF1RewardManager
    assert {get_reward_manager_cls(n).mode.value for n in ("astra_f1", "astra_recall", "astra_precision")} == {
        "f1",
        "recall",
        "precision",
    }


def test_run_single_scores_and_reports_every_count(build):
    t = build.target()
    calls = [build.solving_call(i) for i in (1, 2, 3, 4)] + [build.call("t1", "{}"), build.call("t2", "{}")]
    out = run(make(), sample(build.episode(calls, channel(t.final_answer), turns=5), t.model_dump_json()))
    assert out["reward_score"] == pytest.approx(0.8, abs=1e-6)
    info = out["reward_extra_info"]
    assert (info["solved"], info["n"], info["calls"], info["turns"]) == (4.0, 4.0, 6.0, 5.0)
    assert info["f1"] == out["reward_score"]


def test_the_root_answer_setting_is_on_by_default_and_turns_off_for_ablations(build):
    t = build.target()
    data = sample(
        build.episode([build.solving_call(i) for i in (1, 2, 3, 4)], "I could not tell."), t.model_dump_json()
    )
    assert run(make(), data)["reward_extra_info"]["solved"] == 3.0
    plain = OmegaConf.merge(CONFIG, {"astra": {"reward": {"root_answer": False}}})
    assert run(make(config=plain), data)["reward_extra_info"]["solved"] == 4.0


def test_ablation_managers_reward_their_own_quantity(build):
    t = build.target()
    data = sample(build.episode([build.solving_call(1), build.call("t2", "{}")]), t.model_dump_json())
    assert run(make("astra_recall"), data)["reward_score"] == pytest.approx(0.25)
    assert run(make("astra_precision"), data)["reward_score"] == pytest.approx(0.5, abs=1e-6)


def test_ground_truth_may_arrive_decoded(build):
    t = build.target()
    out = run(make(), sample(build.episode([build.solving_call(1)]), t.model_dump()))
    assert out["reward_extra_info"]["solved"] == 1.0


@pytest.mark.parametrize(
    ("extra_fields", "needle"),
    [
        (None, "tool_extra_fields is missing"),
        ({"other": 1}, "has no 'astra_episode'"),
        ({"astra_episode": {"version": 1}}, "lacks the field 'env_id'"),
        ({"astra_episode": {"version": 1, "env_id": "env-trip", "calls": [{"turn": 1}]}}, "calls[0] is malformed"),
        ({"astra_episode": {"version": 99, "env_id": "env-trip"}}, "version is 99"),
    ],
)
def test_malformed_extra_fields_raise_naming_the_field_and_sample(build, extra_fields, needle):
    with pytest.raises(RewardInputError) as err:
        run(make(), sample(extra_fields, build.target().model_dump_json()))
    assert needle in str(err.value)
    assert "uid='u-1'" in str(err.value) and "index=7" in str(err.value)


@pytest.mark.parametrize(
    ("ground_truth", "needle"),
    [
        ("not json", "reward_model.ground_truth is not a RewardTarget"),
        ('{"env_id": "env-trip"}', "is not a RewardTarget"),
        (42, "must be a RewardTarget JSON string"),
        ('{"env_id": "env-trip", "final_answer": "x", "sub_questions": []}', "has no sub_questions"),
    ],
)
def test_malformed_ground_truth_raises_naming_the_field(build, ground_truth, needle):
    with pytest.raises(RewardInputError, match="reward_model.ground_truth") as err:
        run(make(), sample(build.episode([]), ground_truth))
    assert needle in str(err.value)


def test_an_episode_of_another_environment_is_refused(build):
    log = build.episode([build.solving_call(1)])
    log.env_id = "env-elsewhere"
    with pytest.raises(RewardInputError, match="ran env 'env-elsewhere'"):
        run(make(), sample(log, build.target().model_dump_json()))


def test_configurations_that_would_bypass_or_mistune_the_reward_are_refused():
    with pytest.raises(ValueError, match="custom_reward_function"):
        make(config=OmegaConf.merge(CONFIG, {"reward": {"custom_reward_function": {"path": "x.py"}}}))
    with pytest.raises(ValueError, match="reward_model.enable"):
        make(config=OmegaConf.merge(CONFIG, {"reward": {"reward_model": {"enable": True}}}))
    with pytest.raises(ValueError, match="unknown keys \\['epsilon'\\]"):
        make(config=OmegaConf.merge(CONFIG, {"astra": {"reward": {"epsilon": 0.1}}}))
    assert RewardSettings.from_config(OmegaConf.merge(CONFIG, {"astra": {"reward": {"eps": 0.5}}})).eps == 0.5
