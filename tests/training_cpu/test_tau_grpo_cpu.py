"""One GRPO step of verl's own PPO loop (`main_ppo +recipe=astra_tau_cpu`) on τ-bench retail train
tasks with the scripted user: the loop runs end to end (rows from the tau_bench family, the
tau_user hook, τ-bench's tools in the sandbox, the astra_tau reward). The random tiny model does
not solve τ-bench tasks: this checks the plumbing, not learning."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from taukit import require_tau_bench


@pytest.mark.slow
def test_one_grpo_step_on_retail_train_tasks_with_the_scripted_user(tmp_path, tiny_model_dir, trainer_process):
    require_tau_bench()
    from env_registry.families import tau_rows

    tau_rows.build(tmp_path / "tau", "retail", "train", indices=[0, 1])
    dump = tmp_path / "rollouts"
    proc = trainer_process(
        [
            sys.executable, "-m", "verl.trainer.main_ppo", "+recipe=astra_tau_cpu",
            f"astra.tau_dir={tmp_path / 'tau'}",
            f"actor_rollout_ref.model.path={tiny_model_dir}",
            "actor_rollout_ref.rollout.n=2",  # 2 tasks x 2 samples: micro-batches of 4 (the recipe's 8 need 8)
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
            "data.max_response_length=256",
            f"trainer.rollout_data_dir={dump}",
        ],
        cwd=tmp_path,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert re.search(r"step:1 - ", out) and not re.search(r"step:2 - ", out), out[-3000:]  # one step, logged
    samples = [json.loads(line) for line in Path(dump, "1.jsonl").read_text().splitlines()]
    assert len(samples) >= 4
    # every prompt holds the policy and the scripted user's first message, the task's instruction
    instructions = [json.loads(r)[0] for r in _scripts(tmp_path / "tau" / "retail_train.parquet")]
    assert all("retail agent" in s["input"].lower() for s in samples)
    assert all(any(i[:60] in s["input"] for i in instructions) for s in samples)
    assert all(s["score"] in (0.0, 1.0) for s in samples)  # τ-bench's reward is 0 or 1


def _scripts(path: Path) -> list[str]:
    import pandas as pd

    return [r["interaction_kwargs"]["script"] for r in pd.read_parquet(path)["extra_info"]]
