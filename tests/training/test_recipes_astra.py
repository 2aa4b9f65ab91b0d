"""The astra recipes as verl sees them: ablations compose the base recipe, sweeps over recipes
compose, and every part astra_smoke names is built the way verl builds it (the reward manager
through `RewardLoopWorker`, the sampler through `PPOTrainer._build_replay_buffer`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from tensordict import TensorDict
from testkit import REPO

from astra_verl.calls.call_log import CallRecord, EpisodeLog
from env_registry.call_gate import CallStatus
from env_registry.spec import RewardTarget, TargetSubQuestion

ABLATIONS = {
    "astra_grpo_recall": {"reward.reward_manager.name": "astra_recall"},
    "astra_grpo_precision": {"reward.reward_manager.name": "astra_precision"},
    "astra_grpo_mix_none": {"data.train_files": "runs/envs/mix_none/train.parquet"},
    "astra_grpo_mix_random": {"data.val_files": "runs/envs/mix_random/val.parquet"},
}
INHERITED = {  # what every ablation keeps from astra_grpo (the paper's settings and our hooks)
    "algorithm.adv_estimator": "grpo",
    "actor_rollout_ref.actor.use_kl_loss": False,
    "actor_rollout_ref.actor.optim.lr": 2.0e-6,
    "actor_rollout_ref.rollout.multi_turn.max_assistant_turns": 32,
    "trainer.v1.sampler.custom_sampler.name": "AstraReplayBuffer",
    "astra.batch_filling.carry_over": True,
}


def compose(primary: str, overrides: list[str]):
    import verl  # noqa: F401  - registers the recipe search path
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = hydra_compose(primary, overrides=overrides)
    OmegaConf.resolve(cfg)  # as TaskRunnerV1.run does before building anything
    return cfg


@pytest.mark.parametrize("name", sorted(ABLATIONS))
def test_ablations_override_only_their_own_settings(name):
    cfg = compose("ppo_trainer", [f"+recipe={name}"])
    for key, value in {**INHERITED, **ABLATIONS[name]}.items():
        assert OmegaConf.select(cfg, key) == value, (name, key)
    assert cfg.trainer.experiment_name == name
    if "mix" not in name:
        assert cfg.data.train_files == "runs/envs/mix_banded/train.parquet"


def test_a_multirun_sweep_over_recipes_and_data_dir_composes_every_job():
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = ["+recipe=astra_grpo,astra_grpo_recall,astra_grpo_mix_none", "astra.data_dir=/data/envs"]
    jobs = BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(args), max_batch_size=None)[0]
    seen = {(c.reward.reward_manager.name, c.data.train_files) for c in (compose("ppo_trainer", list(j)) for j in jobs)}
    assert seen == {
        ("astra_f1", "/data/envs/mix_banded/train.parquet"),
        ("astra_recall", "/data/envs/mix_banded/train.parquet"),
        ("astra_f1", "/data/envs/mix_none/train.parquet"),
    }


def test_sft_recipe_composes_on_the_sft_trainer_and_names_a_loadable_dataset():
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset
    from verl.utils.import_utils import load_extern_object

    cfg = compose("sft_trainer_engine", ["+recipe=astra_sft", "astra.sft_data=/data/sft.parquet"])
    assert (cfg.data.train_batch_size, cfg.data.max_length, cfg.trainer.total_epochs) == (32, 20480, 2)
    assert (cfg.optim.lr_scheduler_type, cfg.optim.lr_warmup_steps_ratio, cfg.optim.lr) == ("cosine", 0.05, 5e-6)
    assert cfg.data.train_files == "/data/sft.parquet"
    assert issubclass(load_extern_object(cfg.data.custom_cls.path, cfg.data.custom_cls.name), MultiTurnSFTDataset)


def test_grpo_recipes_pass_verls_config_validation():
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    for name in ("astra_grpo", "astra_smoke"):
        cfg = compose("ppo_trainer", [f"+recipe={name}", "actor_rollout_ref.model.path=/models/x"])
        validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        # one full-length sequence fits a dynamic micro-batch (verl asserts it at the first update)
        a = cfg.actor_rollout_ref.actor
        assert a.ppo_max_token_len_per_gpu * a.ulysses_sequence_parallel_size >= (
            cfg.data.max_prompt_length + cfg.data.max_response_length
        )
        assert cfg.actor_rollout_ref.rollout.max_model_len >= cfg.data.max_prompt_length + cfg.data.max_response_length


def smoke_sample(log: EpisodeLog, target: RewardTarget) -> DataProto:  # noqa: F821
    """One trajectory as `AgentLoopWorker._compute_score` hands it to a reward worker."""
    from verl import DataProto

    prompts, responses = torch.tensor([[1, 2, 3]]), torch.tensor([[4, 5]])
    tool_extra = np.empty(1, dtype=object)
    tool_extra[0] = log.to_extra_fields()
    return DataProto(
        batch=TensorDict(
            {"prompts": prompts, "responses": responses, "attention_mask": torch.ones(1, 5, dtype=torch.int64)},
            batch_size=1,
        ),
        non_tensor_batch={
            "uid": np.array(["u"], dtype=object),
            "data_source": np.array(["astra/smoke"], dtype=object),
            "reward_model": np.array([{"style": "rule", "ground_truth": target.model_dump_json()}], dtype=object),
            "extra_info": np.array([{"index": 0}], dtype=object),
            "__num_turns__": np.array([4]),
            "tool_extra_fields": tool_extra,
        },
    )


def test_astra_smoke_parts_are_built_the_way_verl_builds_them(tiny_model_dir):
    from types import SimpleNamespace

    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    from astra_verl.reward.managers import AstraF1RewardManager
    from astra_verl.training.sampler import AstraReplayBuffer

    cfg = compose("ppo_trainer", ["+recipe=astra_smoke", f"actor_rollout_ref.model.path={tiny_model_dir}"])
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop in _agent_loop_registry

    # reward: RewardLoopWorker loads the tokenizer and the manager from the config, then scores
    worker = RewardLoopWorker(cfg)
    assert isinstance(worker.reward_manager, AstraF1RewardManager)
    target = RewardTarget(
        env_id="e1",
        final_answer="42",
        sub_questions=[
            TargetSubQuestion(id="a", answer="42", needs_tool=True, tool="lookup"),
            TargetSubQuestion(id="b", answer="7", needs_tool=True, tool="count"),
        ],
    )
    calls = [
        CallRecord(turn=1, index=0, tool="lookup", arguments={}, status=CallStatus.OK, output='{"v": 42}'),
        CallRecord(turn=1, index=1, tool="count", arguments={}, status=CallStatus.BAD_JSON),
    ]
    log = EpisodeLog(env_id="e1", calls=calls, assistant_turns=2, final_answer="It is <answer>42</answer>")
    out = worker.loop.run_until_complete(worker.compute_score(smoke_sample(log, target)))
    assert out["reward_score"] == pytest.approx(0.5, abs=1e-6)  # p = 1/2, r = 1/2
    assert out["reward_extra_info"]["invalid_calls"] == 1.0

    # sampler: verl's own construction path for a custom sampler (no TransferQueue needed to build)
    trainer = SimpleNamespace(config=cfg, trainer_mode=cfg.trainer.v1.trainer_mode, _add_prompts_to_generate=len)
    sampler = PPOTrainer._build_replay_buffer(trainer)
    assert isinstance(sampler, AstraReplayBuffer)
    assert (sampler.filling.max_gen_batches, sampler.filling.on_exhausted) == (2.0, "fill")


def test_the_sampler_refuses_settings_verl_would_silently_ignore():
    from types import SimpleNamespace

    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    def build(overrides):
        cfg = compose("ppo_trainer", ["+recipe=astra_grpo", *overrides])
        trainer = SimpleNamespace(config=cfg, trainer_mode=cfg.trainer.v1.trainer_mode, _add_prompts_to_generate=len)
        return PPOTrainer._build_replay_buffer(trainer)

    with pytest.raises(ValueError, match="algorithm.filter_groups.enable=True is ignored"):
        build(["algorithm.filter_groups.enable=true"])
    with pytest.raises(ValueError, match="data.gen_batch_size=1"):
        build(["data.gen_batch_size=8"])
    with pytest.raises(ValueError, match="trainer_mode=sync only"):
        build(["trainer.v1.trainer_mode=colocate_async"])
    with pytest.raises(ValueError, match="unknown keys \\['detla'\\]"):
        build(["+astra.batch_filling.detla=0.1"])


def test_recipes_are_where_the_package_ships_them():
    names = {p.stem for p in (REPO / "recipes" / "recipe").glob("astra_*.yaml")}
    assert {"astra_grpo", "astra_sft", "astra_smoke", *ABLATIONS} <= names
