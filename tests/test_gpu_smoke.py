"""scripts/gpu_smoke.sh up to the GPU boundary: `--prepare-only` builds SmolLM2, the environments,
the RL parquet and the golden SFT data, and writes the trainers' overrides; here every override
composes against verl 0.9.1's own config (Hydra refuses a key the schema lacks), the GRPO config
passes verl's validation, and the SFT data goes through verl's multi-turn SFT dataset with
SmolLM2's tokenizer as the GPU run will read it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf
from testkit import REPO
from transformers import AutoTokenizer

from env_registry.rows import RowInfo

pytestmark = pytest.mark.slow

SFT_STEPS, GRPO_STEPS, EVAL_LIMIT = 7, 2, 1  # one held-out row of 48 tokens: hf_cpu on 2 shared cores is slow


def compose(primary: str, overrides: list[str]):
    import verl  # noqa: F401  - registers the recipe search path
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = hydra_compose(primary, overrides=overrides)
    OmegaConf.resolve(cfg)
    return cfg


@pytest.fixture(scope="module")
def prepared(smollm2_dir, tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("gpu_smoke")
    env = {**os.environ, "RUN_DIR": str(run_dir), "MODEL_DIR": str(smollm2_dir), "N_ENVS": "20",
           "SFT_STEPS": str(SFT_STEPS), "GRPO_STEPS": str(GRPO_STEPS), "PYTHON": sys.executable,
           "EVAL_LIMIT": str(EVAL_LIMIT), "EVAL_MAX_RESPONSE": "48"}  # fmt: skip
    proc = subprocess.run(
        ["bash", "scripts/gpu_smoke.sh", "--prepare-only"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "prepared (--prepare-only)" in proc.stdout
    return run_dir


def overrides(run_dir: Path, name: str) -> list[str]:
    return (run_dir / f"{name}.overrides").read_text().splitlines()


def test_sft_overrides_compose_and_its_data_loads_in_verls_dataset(prepared, smollm2_dir):
    from astra_verl.training.sft_dataset import TrajSFTDataset

    cfg = compose("sft_trainer_engine", ["+recipe=astra_sft", *overrides(prepared, "sft")])
    assert cfg.model.path == str(smollm2_dir) and cfg.trainer.total_training_steps == SFT_STEPS
    assert "hf_model" in cfg.checkpoint.save_contents  # the GRPO stage loads <ckpt>/huggingface
    assert cfg.data.max_token_len_per_gpu >= cfg.data.max_length
    tokenizer = AutoTokenizer.from_pretrained(cfg.model.path)
    data = TrajSFTDataset(cfg.data.train_files, tokenizer, OmegaConf.to_container(cfg.data))
    assert len(data) >= 4
    for i in range(len(data)):  # verl's per-turn tokenization check passes on every conversation
        item = data[i]  # the trainer's pad mode (no padding: every token is live)
        live = item["attention_mask"].bool() if "attention_mask" in item else item["loss_mask"] >= 0
        assert 0 < int(item["loss_mask"][live].sum()) < int(live.sum()) <= cfg.data.max_length
    item = data[0]
    live = item["attention_mask"].bool() if "attention_mask" in item else item["loss_mask"] >= 0
    text = tokenizer.decode(item["input_ids"][live][item["loss_mask"][live].bool()])
    assert "<tool_call>" in text  # what SFT teaches: the calls


def test_the_other_half_sft_differs_from_sft_only_in_its_data_and_folder(prepared):
    """Stage 10's SFT with the other half (issue 49): the same settings and steps as stage 7, on the
    same demonstrations plus those of environments of every other variant, into its own folder."""
    import pandas as pd

    plain, mixed = overrides(prepared, "sft"), overrides(prepared, "sft_variants")
    changed = {a.split("=", 1)[0] for a in set(plain) ^ set(mixed)}
    assert changed == {"astra.sft_data", "trainer.default_local_dir"}, changed
    cfg = compose("sft_trainer_engine", ["+recipe=astra_sft", *mixed])
    assert cfg.trainer.total_training_steps == SFT_STEPS
    rows = pd.read_parquet(cfg.data.train_files)
    answerable = pd.read_parquet(prepared / "sft.parquet")
    n = len(answerable)  # the same demonstrations first, in the same order
    assert len(rows) > n and rows["env_id"].iloc[:n].tolist() == answerable["env_id"].tolist()
    others = set(rows["variant"].iloc[n:])
    assert others and "answerable" not in others, others


def test_grpo_overrides_compose_validate_and_start_from_the_sft_checkpoint(prepared):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    sft = compose("sft_trainer_engine", ["+recipe=astra_sft", *overrides(prepared, "sft")])
    cfg = compose("ppo_trainer", ["+recipe=astra_smoke", *overrides(prepared, "grpo")])
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    assert cfg.actor_rollout_ref.model.path == f"{sft.trainer.default_local_dir}/global_step_{SFT_STEPS}/huggingface"
    assert cfg.trainer.total_training_steps == GRPO_STEPS == cfg.trainer.test_freq
    assert cfg.trainer.val_before_train  # held-out evaluation before the first step too
    for split in (cfg.data.train_files, cfg.data.val_files):
        table = pq.read_table(split)
        assert table.num_rows >= cfg.data.train_batch_size // 2
    train, val = (
        {RowInfo.from_extra_info(e).env_id for e in pq.read_table(split).column("extra_info").to_pylist()}
        for split in (cfg.data.train_files, cfg.data.val_files)
    )
    assert train and val and not train & val  # held out: no validation environment is trained on
    # the last step's actor is saved as a Hugging Face checkpoint: the held-out `eval envs` loads it
    assert cfg.trainer.save_freq == GRPO_STEPS and "hf_model" in cfg.actor_rollout_ref.actor.checkpoint.save_contents


def test_the_held_out_baseline_ran_eval_envs_on_the_base_model(prepared):
    """The CPU half of the held-out evaluation: `eval envs` of SmolLM2 before SFT on the val rows,
    the command the script runs on the SFT and GRPO checkpoints after training."""
    log = (prepared / "eval_base.log").read_text()
    records = (prepared / "eval_base" / "results.jsonl").read_text().splitlines()
    assert len(records) == EVAL_LIMIT, log[-2000:]
    assert re.search(rf"^all\s+{EVAL_LIMIT}\s+\d\.\d{{3}}", log, re.M), log[-2000:]


GRPO_KEYS = ["critic/score/mean", "astra/f1/mean", "astra/solved_rate", "astra/turns/mean",
             "astra/calls_per_episode/mean", "astra/invalid_call_rate", "astra/distractor_call_rate",
             "astra/batch_filling/dispatched_prompts", "timing_s/step"]  # fmt: skip


def smoke_metrics(tmp_path: Path, grpo_lines: list[str]) -> subprocess.CompletedProcess:
    (tmp_path / "sft.log").write_text("noise\nstep:1 - train/loss:2.400 - train/lr:1e-05\nstep:2 - train/loss:1.100\n")
    (tmp_path / "train.log").write_text("\n".join(grpo_lines) + "\n")
    return subprocess.run(
        [sys.executable, "scripts/smoke_metrics.py", str(tmp_path / "sft.log"), str(tmp_path / "train.log"),
         "--grpo-steps", "2"], cwd=REPO, capture_output=True, text=True)  # fmt: skip


def test_smoke_metrics_reports_held_out_before_and_after_and_fails_on_a_missing_step(tmp_path):
    held_out = "val-core/astra/procedural/reward/mean@1:{r} - val-aux/astra/procedural/f1/mean@1:{f}"
    step = " - ".join(f"{k}:0.5" for k in GRPO_KEYS)
    lines = [f"(TaskRunner) step:0 - {held_out.format(r=0.125, f=0.25)}", f"step:1 - {step}",
             f"step:2 - {step} - {held_out.format(r=0.375, f=0.5)} - timing_s/gen:abc"]  # fmt: skip
    proc = smoke_metrics(tmp_path, lines)
    assert proc.returncode == 0, proc.stderr
    assert "SFT: 2 steps, loss 2.400 (step 1) -> 1.100 (step 2)" in proc.stdout
    assert re.search(r"val-core/astra/procedural/reward/mean@1\s+0\.125\s+0\.375", proc.stdout)
    proc = smoke_metrics(tmp_path, lines[:2])  # the run died after step 1
    assert proc.returncode == 1 and "expected GRPO steps 1..2, got [1]" in proc.stderr
    assert "no held-out validation metrics after the last step" in proc.stderr
