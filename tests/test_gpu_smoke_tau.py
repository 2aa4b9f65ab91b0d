"""scripts/gpu_smoke.sh's τ-bench retail GRPO stage: its overrides (the script's `TAU_ARGS`, with
the script's variables filled in as it fills them) compose with +recipe=astra_tau_grpo against
verl 0.9.1's own config (Hydra refuses a key the schema lacks) and pass verl's validation, and
the run fits SmolLM2's 8,192-token context with the retail prompt (4,543 tokens in SmolLM2's
template). The stage itself needs a GPU; `bash -n scripts/gpu_smoke.sh` checks the rest."""

from __future__ import annotations

import re

from omegaconf import OmegaConf
from testkit import REPO


def tau_args(run_dir: str, model: str, steps: int) -> list[str]:
    text = (REPO / "scripts" / "gpu_smoke.sh").read_text()
    block = re.search(r"^TAU_ARGS=\(\n(.*?)\n\)", text, re.S | re.M)
    assert block, "scripts/gpu_smoke.sh has no TAU_ARGS=( ... ) block"
    args = [m.group(1) for m in re.finditer(r'^\s*"([^"]*)"', block.group(1), re.M)]
    values = {"$MODEL": model, "$TAU_DIR": f"{run_dir}/tau", "$TAU_GRPO_STEPS": str(steps), "$RUN_DIR": run_dir}
    for name, value in values.items():
        args = [a.replace(name, value) for a in args]
    assert not [a for a in args if "$" in a], args
    return args


def test_the_tau_grpo_overrides_compose_and_validate(tmp_path):
    import verl  # noqa: F401  - registers the recipe search path
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = compose("ppo_trainer", overrides=["+recipe=astra_tau_grpo", *tau_args(str(tmp_path), "/m", 2)])
    OmegaConf.resolve(cfg)
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    rollout = cfg.actor_rollout_ref.rollout
    assert rollout.prompt_length + rollout.response_length <= rollout.max_model_len == 8192
    assert rollout.prompt_length > 4543  # SmolLM2's retail prompt, and room for the user's first message
    assert rollout.multi_turn.max_assistant_turns == 30 and cfg.reward.reward_manager.name == "astra_tau"
    assert cfg.data.train_files == f"{tmp_path}/tau/retail_train.parquet"
    assert cfg.data.val_files == f"{tmp_path}/tau/retail_test.parquet"
    assert cfg.trainer.total_training_steps == 2 == cfg.trainer.save_freq == cfg.trainer.test_freq
    assert "hf_model" in cfg.actor_rollout_ref.actor.checkpoint.save_contents  # `eval tau` loads the actor
