"""Fixtures for the CPU training tests: procedural environments, their RL parquet, an SFT parquet of their
golden calls (outputs from real sandbox runs), and helpers to run verl's trainers in a fresh process.

Everything is built locally (tiny model, seeded procedural environments); nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

# Single-hop environments (one tool call each) without a system prompt keep sequences short enough that
# verl's SFT trainer fits the tiny random model to their golden calls in SFT_STEPS steps; it then emits
# real tool calls in the GRPO test. The RL rows and the SFT rows are the same tasks.
ENV_COUNT = 4
SFT_STEPS = 60


def run_module(args: list[str], cwd: Path, timeout: int = 900, env: dict[str, str] | None = None):
    """Run `python -m ...` (or torchrun) in a fresh process, as a user would; output and exit code."""
    full_env = {**os.environ, "VERL_PLATFORM": "cpu", "RAY_DEDUP_LOGS": "0", **(env or {})}
    return subprocess.run(args, cwd=str(cwd), env=full_env, capture_output=True, text=True, timeout=timeout)


def python(*args: str) -> list[str]:
    return [sys.executable, *args]


@pytest.fixture(scope="session")
def procedural_envs(tmp_path_factory, tiny_model_dir):
    """The RL export (no distractors, no system prompt) of a store of seeded procedural environments,
    moved to another folder with the store deleted: every training test (SFT data, GRPO steps,
    evaluation) runs from a dataset that travelled without its store, as on another node."""
    root = tmp_path_factory.mktemp("envs")
    store = root / "store"
    gen = run_module(
        python(
            "-m",
            "env_registry",
            "--store",
            str(store),
            "-q",
            "generate",
            "--n",
            str(ENV_COUNT),
            "--max-hops",
            "1",
            "--scenario-types",
            "single_hop",
        ),  # fmt: skip
        cwd=root,
    )
    assert gen.returncode == 0, gen.stderr[-3000:]
    export = run_module(
        python(
            "-m", "env_registry", "--store", str(store), "-q", "export-parquet", "--out", str(root / "rl"),
            "--mixing", "none", "--tokenizer", str(tiny_model_dir), "--max-prompt-length", "1536",
            "--val-fraction", "0.2", "--no-system-prompt",
        ),
        cwd=root,
    )  # fmt: skip
    assert export.returncode == 0, export.stderr[-3000:]
    moved = tmp_path_factory.mktemp("moved") / "rl"
    shutil.move(root / "rl", moved)
    shutil.rmtree(store)
    return moved / "mix_none"


@pytest.fixture(scope="session")
def golden_sft_parquet(procedural_envs, tmp_path_factory):
    path = tmp_path_factory.mktemp("sft") / "golden.parquet"
    proc = run_module(
        python(
            "-m", "env_registry", "-q", "export-sft", str(procedural_envs / "train.parquet"), "--output-file", str(path)
        ),
        cwd=path.parent,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return path


@pytest.fixture(scope="session")
def sft_run(golden_sft_parquet, tiny_model_dir, tmp_path_factory):
    """`astra_sft_cpu` (verl's SFT trainer under torchrun) fitted to the golden calls: (process, checkpoint)."""
    out = tmp_path_factory.mktemp("sft_run")
    proc = run_module(
        [
            sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1",
            "-m", "verl.trainer.sft_trainer", "+recipe=astra_sft_cpu",
            f"data.train_files={golden_sft_parquet}", f"model.path={tiny_model_dir}",
            f"trainer.total_training_steps={SFT_STEPS}", "trainer.total_epochs=1000",
            "optim.lr=3e-3", "optim.lr_scheduler_type=constant", f"trainer.default_local_dir={out / 'ckpt'}",
        ],
        cwd=out,
    )  # fmt: skip
    return SimpleNamespace(proc=proc, checkpoint=out / "ckpt" / f"global_step_{SFT_STEPS}", steps=SFT_STEPS)


@pytest.fixture(scope="session")
def trainer_process():
    """`run_module`: how the tests start verl's trainers."""
    return run_module
