"""Fixtures for the CPU training tests: procedural environments, their RL parquet, an SFT parquet of their
golden calls (outputs from real sandbox runs), and helpers to run verl's trainers in a fresh process.

Everything is built locally (tiny model, seeded procedural environments); nothing is downloaded.
"""

from __future__ import annotations

import json
import os
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
    """A store of seeded procedural environments and its RL export (no distractors, no system prompt)."""
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
    return root / "rl" / "mix_none"


def golden_sft_rows(rl_parquet: Path) -> list[dict]:
    """One SFT conversation per RL row: the row's prompt and tools, then one assistant tool call per
    tool-needing sub-question (its golden call), the call's real output from the sandbox, and the final
    answer. Calls are sequential (one per turn): verl's turn-by-turn tokenization needs that."""
    import pandas as pd

    from astra_verl.sandbox import BatchJob, Module, Program, run_programs
    from env_registry.export import tool_schemas
    from env_registry.matching import answer_in_text
    from env_registry.rows import RowInfo
    from env_registry.store import EnvStore
    from env_registry.validate import replay_module

    rows = pd.read_parquet(rl_parquet).to_dict("records")
    stores: dict[str, EnvStore] = {}
    plans, jobs = [], []
    for row in rows:
        info = RowInfo.from_extra_info(row["extra_info"])
        store = stores.setdefault(info.store, EnvStore.open(info.store, "r"))
        env = store.get(info.env_id)
        calls = []
        for q in env.sub_questions:
            if not q.needs_tool:
                continue
            tool = env.tool(q.tool)
            golden = next(g for g in tool.golden_calls if answer_in_text(q.answer, g.expected, q.match))
            calls.append((tool.name, golden.args))
        program = Program(tuple(Module(name=replay_module(t.name, env.id), source=t.source) for t in env.tools))
        jobs.append(BatchJob(program, [(replay_module(name, env.id), name, args) for name, args in calls]))
        plans.append((row, env, calls, tool_schemas(env, info.tools, store)))
    outputs = run_programs(jobs)
    sft = []
    for (row, env, calls, tools), results in zip(plans, outputs, strict=True):
        messages = [dict(m) for m in row["prompt"]]
        for i, ((name, args), result) in enumerate(zip(calls, results, strict=True)):
            assert result.ok, f"golden call {name}({args}) of {env.id} failed in the sandbox: {result.message}"
            call = {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
            messages.append({"role": "tool", "tool_call_id": f"call_{i}", "name": name, "content": result.text})
        messages.append({"role": "assistant", "content": env.final_answer})
        sft.append({"messages": messages, "tools": json.dumps(tools)})
    return sft


@pytest.fixture(scope="session")
def golden_sft_parquet(procedural_envs, tmp_path_factory):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = golden_sft_rows(procedural_envs / "train.parquet")
    path = tmp_path_factory.mktemp("sft") / "golden.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
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
