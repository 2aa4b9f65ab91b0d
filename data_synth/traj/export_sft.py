"""Output (step 8, docs/method.md §1.7): SFT parquet for verl, the raw trajectories as JSONL.

`sft.parquet` (one row per kept trajectory, each an `env_registry.sft_record.SFTRecord`, the row
every SFT writer builds, with its `SFT_VERSION`):

    messages     list of {role, content, tool_calls?, tool_call_id?, name?}: OpenAI chat format;
                 assistant tool calls as {id, type: "function", function: {name, arguments}}
                 with `arguments` the JSON text the model wrote (chat templates accept text)
    tools        JSON text of the OpenAI tools list the agent had (`env_registry/sft_record.py` says
                 why text; `astra_verl.training.sft_dataset` is the dataset class that reads it)
    server_id, task_id, source, augmentation (the task's: base, diverse, complicate, persona), score,
    num_tool_calls, sft_version
    variant      the task's behaviour where `traj.variants` derived it (`env_registry.spec.Variant`:
                 unanswerable, missing_value, missing_function); null for an answerable task, as
                 before variants

`trajectories.jsonl`: every trajectory the interaction produced, with its judgement (or the
judge's rejection reason and detail), for inspection and re-filtering.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from astra_foundation.strict import StrictModel
from data_synth.pipeline import read_envelopes
from data_synth.traj.records import JudgedTrajectory, Trajectory
from env_registry.sft_record import SFTRecord
from env_registry.spec import Variant


class SFTExportConfig(StrictModel):
    section = "export"

    system_prompt: bool = True  # keep the agent's system message in `messages`
    parallel_calls: Literal["keep", "drop"] = "keep"


def _message(m: dict[str, Any]) -> dict[str, Any]:
    """One message with the keys verl's dataset and chat templates read, content always text."""
    out: dict[str, Any] = {"role": m["role"], "content": m.get("content") or ""}
    if m.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]},
            }
            for c in m["tool_calls"]
        ]
    if m["role"] == "tool":
        out["tool_call_id"] = m["tool_call_id"]
        out["name"] = m.get("name", "")
    return out


def has_parallel_calls(traj: Trajectory) -> bool:
    return any(len(m.get("tool_calls") or []) > 1 for m in traj.messages)


def sft_row(item: JudgedTrajectory, cfg: SFTExportConfig) -> dict[str, Any]:
    t = item.trajectory
    messages = [_message(m) for m in t.messages if cfg.system_prompt or m["role"] != "system"]
    record = SFTRecord.build(
        f"trajectory {item.key}",
        messages,
        t.tools,
        server_id=t.server_id,
        task_id=t.task.key,
        source=t.task.source,
        augmentation=t.task.augmentation,
        variant=None if t.task.behaviour is Variant.ANSWERABLE else t.task.behaviour,
        score=item.judgement.score,
    )
    return record.row()


def write_sft(items: list[JudgedTrajectory], path: str | Path, cfg: SFTExportConfig | None = None) -> dict[str, int]:
    """Write the parquet; returns counts (rows, dropped for parallel calls)."""
    cfg = cfg or SFTExportConfig()
    rows, dropped = [], 0
    for item in sorted(items, key=lambda i: i.key):
        if cfg.parallel_calls == "drop" and has_parallel_calls(item.trajectory):
            dropped += 1
            continue
        rows.append(sft_row(item, cfg))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".parquet.tmp")
    import pyarrow as pa  # here, not at the top: the pipelines' `--help` must not pay for it
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(path)
    return {"rows": len(rows), "dropped_parallel_calls": dropped}


def write_trajectories(run_dir: str | Path, path: str | Path, interact_step: str, judge_step: str) -> int:
    """Every trajectory with its judge outcome, one JSON line each (sorted by key)."""
    judged = read_envelopes(run_dir, judge_step)
    path = Path(path)
    tmp = path.with_suffix(".jsonl.tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for key, env in sorted(read_envelopes(run_dir, interact_step).items()):
            if env.status != "ok":
                continue
            j = judged.get(key)
            row: dict[str, Any] = {"trajectory": env.out[0], "judge_status": j.status if j else "pending"}
            if j is not None and j.status == "ok":
                row["judgement"] = j.out[0]["judgement"]
            elif j is not None:
                row["judge_reason"], row["judge_detail"] = j.reason, j.detail
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(path)
    return n
