"""scripts/gpu_smoke.sh's τ-bench retail GRPO stage: its overrides (the script's `TAU_ARGS`, with
the script's variables filled in as it fills them) compose with +recipe=astra_tau_grpo against
verl 0.9.1's own config (Hydra refuses a key the schema lacks) and pass verl's validation, and
the run fits SmolLM2's 8,192-token context with the retail prompt (4,543 tokens in SmolLM2's
template). The stage itself needs a GPU; `bash -n scripts/gpu_smoke.sh` checks the rest."""

from __future__ import annotations

from testkit import REPO, compose_ppo, script_array


def tau_args(run_dir: str, model: str, steps: int) -> list[str]:
    values = {"$MODEL": model, "$TAU_DIR": f"{run_dir}/tau", "$TAU_GRPO_STEPS": str(steps), "$RUN_DIR": run_dir}
    return script_array(REPO / "scripts" / "gpu_smoke.sh", "TAU_ARGS", values)


def test_the_tau_grpo_overrides_compose_and_validate(tmp_path):
    cfg = compose_ppo(["+recipe=astra_tau_grpo", *tau_args(str(tmp_path), "/m", 2)])
    rollout = cfg.actor_rollout_ref.rollout
    assert rollout.prompt_length + rollout.response_length <= rollout.max_model_len == 8192
    assert rollout.prompt_length > 4543  # SmolLM2's retail prompt, and room for the user's first message
    assert rollout.multi_turn.max_assistant_turns == 30 and cfg.reward.reward_manager.name == "astra_tau"
    assert cfg.data.train_files == f"{tmp_path}/tau/retail_train.parquet"
    assert cfg.data.val_files == f"{tmp_path}/tau/retail_test.parquet"
    assert cfg.trainer.total_training_steps == 2 == cfg.trainer.save_freq == cfg.trainer.test_freq
    assert "hf_model" in cfg.actor_rollout_ref.actor.checkpoint.save_contents  # `eval tau` loads the actor
