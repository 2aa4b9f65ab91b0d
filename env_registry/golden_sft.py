"""Golden demonstrations: an exported RL row turned into an SFT conversation that solves it.

For each row the conversation is the row's own prompt and tools (distractors included, in the
row's order), then one assistant turn per tool-needing sub-question, in dependency order, calling
that sub-question's golden call; the tool turn carries the output the tool's code actually gave
in the sandbox (never the spec's `expected` text); the last assistant turn is the final answer.
One call per turn: verl's multi-turn SFT dataset tokenizes turn by turn, and grouped parallel tool
results would fail its sanity check.

The parquet has the format `data_synth traj export` writes (`data_synth/traj/export_sft.py`):
`messages`, `tools` (JSON text), plus `env_id` and `sft_version`; verl reads it with
`data_synth.traj.sft_dataset.TrajSFTDataset` (the `astra_sft*` recipes set it). This is the
laptop stand-in for trajectory synthesis: it needs no LLM, and it is what `make demo` fine-tunes
the tiny model on before GRPO, so that the policy emits real tool calls.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from astra_verl.sandbox import BatchJob, Module, Program, run_programs
from env_registry.export import tool_schemas
from env_registry.matching import answer_in_text
from env_registry.rows import RowInfo
from env_registry.spec import EnvSpec, SubQuestion
from env_registry.store import EnvStore
from env_registry.validate import replay_module

SFT_VERSION = 1


class GoldenSFTError(ValueError):
    """An environment has no golden call for a sub-question, or a golden call failed in the sandbox."""


@dataclass(frozen=True)
class GoldenPlan:
    row: dict[str, Any]
    env: EnvSpec
    calls: list[tuple[str, dict[str, Any]]]  # (tool name, arguments) in dependency order
    tools: list[dict[str, Any]]  # the row's tool schemas, in prompt order


def dependency_order(env: EnvSpec) -> list[SubQuestion]:
    """Sub-questions with every dependency before its dependents (spec order among equals)."""
    done: set[str] = set()
    pending = list(env.sub_questions)
    ordered: list[SubQuestion] = []
    while pending:
        ready = [q for q in pending if all(d in done for d in q.depends_on)]
        if not ready:
            raise GoldenSFTError(f"environment {env.id}: the trace has a cycle; validate the store")
        for q in ready:
            ordered.append(q)
            done.add(q.id)
        pending = [q for q in pending if q.id not in done]
    return ordered


def plan_row(row: dict[str, Any], stores: dict[str, EnvStore]) -> GoldenPlan:
    info = RowInfo.from_extra_info(row["extra_info"])
    store = stores.setdefault(info.store, EnvStore.open(info.store, "r"))
    env = store.get(info.env_id)
    calls = []
    for q in dependency_order(env):
        if not q.needs_tool:
            continue
        tool = env.tool(q.tool)
        golden = next((g for g in tool.golden_calls if answer_in_text(q.answer, g.expected, q.match)), None)
        if golden is None:
            raise GoldenSFTError(f"environment {env.id}: no golden call of {tool.name} produces {q.answer!r} ({q.id})")
        calls.append((tool.name, golden.args))
    return GoldenPlan(row, env, calls, tool_schemas(env, info.tools, store))


def conversation(plan: GoldenPlan, outputs: list[Any]) -> dict[str, Any]:
    """The SFT row of a plan, given the sandbox's `CallResult`s of its calls."""
    messages = [dict(m) for m in plan.row["prompt"]]
    for i, ((name, args), result) in enumerate(zip(plan.calls, outputs, strict=True)):
        if not result.ok:
            raise GoldenSFTError(
                f"environment {plan.env.id}: golden call {name}({args}) failed in the sandbox: {result.message}"
            )
        call = {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "name": name, "content": result.text})
    messages.append({"role": "assistant", "content": plan.env.final_answer})
    return {"messages": messages, "tools": json.dumps(plan.tools), "env_id": plan.env.id, "sft_version": SFT_VERSION}


def golden_rows(rl_parquet: str | Path, progress: Callable[[int, int], None] | None = None) -> list[dict[str, Any]]:
    """One golden SFT conversation per row of an exported RL parquet; tool outputs from the sandbox."""
    stores: dict[str, EnvStore] = {}
    plans = [plan_row(row, stores) for row in pq.read_table(rl_parquet).to_pylist()]
    jobs = [
        BatchJob(
            Program(tuple(Module(name=replay_module(t.name, p.env.id), source=t.source) for t in p.env.tools)),
            [(replay_module(name, p.env.id), name, args) for name, args in p.calls],
        )
        for p in plans
    ]
    outputs = run_programs(jobs, progress=progress)
    return [conversation(p, out) for p, out in zip(plans, outputs, strict=True)]


def write_golden_sft(rl_parquet: str | Path, out: str | Path, progress=None) -> int:
    rows = golden_rows(rl_parquet, progress=progress)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out)
    return len(rows)
