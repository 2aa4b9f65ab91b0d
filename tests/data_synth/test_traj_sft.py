"""The SFT export loads in verl's multi-turn SFT dataset (through `TrajSFTDataset`, which checks each
row's version and decodes the `tools` JSON column) and only assistant tokens carry loss."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from data_synth.traj.export_sft import SFTExportConfig, write_sft
from data_synth.traj.records import JudgedTrajectory, Judgement, Task, Trajectory, TrajectoryCall

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "cd",
            "description": "Change directory",
            "parameters": {"type": "object", "properties": {"folder": {"type": "string"}}, "required": ["folder"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "ls",
            "description": "List files",
            "parameters": {"type": "object", "properties": {"a": {"type": "boolean"}}, "required": []},
        },
    },
]


def _judged(key, calls_per_turn=(1, 1)):
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Go to docs and list it."},
    ]
    calls, n = [], 0
    for k in calls_per_turn:
        tcs = []
        for _ in range(k):
            name, args = ("cd", '{"folder": "docs"}') if n == 0 else ("ls", "{}")
            tcs.append({"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": args}})
            calls.append(
                TrajectoryCall(
                    index=n,
                    turn=len(calls),
                    id=f"call_{n}",
                    name=name,
                    arguments=args,
                    status="ok",
                    observation=f"obs {n}",
                )
            )
            n += 1
        messages.append({"role": "assistant", "content": "", "tool_calls": tcs})
        messages += [
            {"role": "tool", "tool_call_id": c["id"], "name": c["function"]["name"], "content": f"obs {c['id'][-1]}"}
            for c in tcs
        ]
    messages.append({"role": "assistant", "content": "docs holds a.txt."})
    task = Task.create(
        server_id="fs", source="chain", tools=["cd", "ls"], query="Go to docs and list it.", prompt="p@v1"
    )
    traj = Trajectory(
        key=key,
        task=task,
        server_id="fs",
        messages=messages,
        tools=TOOLS,
        calls=calls,
        llm_calls=3,
        backend="simulated",
        final_answer="docs holds a.txt.",
    )
    scores = dict.fromkeys(("a", "b"), 1.0)
    return JudgedTrajectory(key=key, trajectory=traj, judgement=Judgement(scores=scores, score=1.0))


def _dataset(path, tokenizer, **config):
    from astra_verl.training.sft_dataset import TrajSFTDataset

    return TrajSFTDataset(str(path), tokenizer, {"max_length": 1024, **config})


def test_sft_parquet_loads_in_verl_and_only_assistant_tokens_carry_loss(tmp_path, tiny_tokenizer):
    path = tmp_path / "sft.parquet"
    assert write_sft([_judged("t1")], path)["rows"] == 1
    df = pd.read_parquet(path)
    assert list(df.columns[:2]) == ["messages", "tools"] and json.loads(df.iloc[0]["tools"]) == TOOLS
    item = _dataset(path, tiny_tokenizer)[0]
    live = item["attention_mask"].bool()
    ids, loss = item["input_ids"][live], item["loss_mask"][live].bool()
    trained = tiny_tokenizer.decode(ids[loss])
    expected = (
        '<tool_call>\n{"name": "cd", "arguments": {"folder": "docs"}}\n</tool_call><|im_end|>\n'
        '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call><|im_end|>\n'
        "docs holds a.txt.<|im_end|>\n"
    )
    assert trained == expected
    untrained = tiny_tokenizer.decode(ids[~loss])
    for text in (
        "You are a helpful assistant.",
        "Go to docs and list it.",
        "obs 0",
        "obs 1",
        '"name": "ls", "description"',
    ):
        assert text in untrained and text not in trained
    # Each tool's schema is rendered as written: no other tool's parameters leak in as nulls.
    assert '"a": null' not in untrained and '"folder": null' not in untrained


def test_parallel_calls_hit_verls_per_turn_check_unless_dropped_or_ignored(tmp_path, tiny_tokenizer):
    path = tmp_path / "sft.parquet"
    write_sft([_judged("t2", calls_per_turn=(2,))], path)
    ds = _dataset(path, tiny_tokenizer)
    with pytest.raises(AssertionError, match="ignore_input_ids_mismatch"):
        ds[0]
    assert _dataset(path, tiny_tokenizer, ignore_input_ids_mismatch=True)[0]["loss_mask"].sum() > 0
    counts = write_sft(
        [_judged("t2", calls_per_turn=(2,)), _judged("t3")], path, SFTExportConfig(parallel_calls="drop")
    )
    assert counts == {"rows": 1, "dropped_parallel_calls": 1}
    no_system = tmp_path / "ns.parquet"
    write_sft([_judged("t3")], no_system, SFTExportConfig(system_prompt=False))
    assert pd.read_parquet(no_system).iloc[0]["messages"][0]["role"] == "user"
    assert _dataset(no_system, tiny_tokenizer)[0]["loss_mask"].sum() > 0
