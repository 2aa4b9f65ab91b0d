"""`data_synth traj import-astra`: ASTRA-SFT-style conversations to the SFT parquet verl reads,
every defect kind rejected with its reason (fixtures we wrote in ASTRA's formats)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from data_synth.__main__ import main as data_synth_main
from data_synth.traj.astra_import import Check, read_conversation

FIXTURE = Path(__file__).parent / "data" / "astra_sft.jsonl"


def _rows() -> list[dict]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines()]


def test_every_defect_kind_is_rejected_with_its_reason(tmp_path, capsys):
    out = tmp_path / "sft.parquet"
    code = data_synth_main(["traj", "import-astra", str(FIXTURE), "--output-file", str(out)])
    printed = capsys.readouterr().out
    assert code == 1 and "kept 2 to" in printed and "rejected 5" in printed
    rejects = [json.loads(line) for line in (tmp_path / "sft.rejects.jsonl").read_text().splitlines()]
    assert {r["line"]: r["problems"][0]["check"] for r in rejects} == {
        3: "call_unknown_tool",
        4: "call_malformed",
        5: "result_without_call",
        6: "agent_error",
        7: "call_without_result",
    }
    assert rejects[0]["record"] == FIXTURE.read_text().splitlines()[2]  # the row as read, nothing lost
    kept = pq.read_table(out).to_pylist()
    assert [r["source"].split(":")[0] for r in kept] == ["astra_sft", "openai"]
    assert [r["num_tool_calls"] for r in kept] == [2, 2]


def test_qwen_agent_steps_become_openai_messages():
    conv = read_conversation(_rows()[0], reasoning="inline")
    assert conv.format == "astra_sft" and conv.problems == [] and conv.server == "weather-server"
    roles = [(m["role"], len(m.get("tool_calls", []))) for m in conv.messages]
    assert roles == [("user", 0), ("assistant", 1), ("tool", 0), ("assistant", 1), ("tool", 0), ("assistant", 0)]
    first, second = conv.messages[1], conv.messages[3]
    assert first["content"].startswith("<think>\nI need the forecast first.")  # reasoning kept, inline
    assert second["content"] == "Converting 24 C."  # text and call of one step merged
    assert conv.messages[2] == {
        "role": "tool",
        "content": '{"city": "Lisbon", "high_c": 24}',
        "tool_call_id": first["tool_calls"][0]["id"],
        "name": "get_forecast",
    }
    assert read_conversation(_rows()[0]).messages[1]["content"] == ""  # reasoning dropped by default


def _parallel_row() -> dict:
    """The first fixture row with two calls in one step, answered out of order (Qwen-Agent ids)."""
    row = _rows()[0]
    user = json.loads(row["trajectory"])[0]
    parallel = [
        user,
        {"role": "assistant", "content": "", "function_call": {"name": "get_forecast", "arguments": '{"city": "A"}'}, "extra": {"function_id": "f1"}},
        {"role": "assistant", "content": "", "function_call": {"name": "get_forecast", "arguments": '{"city": "B"}'}, "extra": {"function_id": "f2"}},
        {"role": "function", "name": "get_forecast", "content": "B: 19", "extra": {"function_id": "f2"}},
        {"role": "function", "name": "get_forecast", "content": "A: 24", "extra": {"function_id": "f1"}},
        {"role": "assistant", "content": "A 24, B 19."},
    ]  # fmt: skip
    return {**row, "trajectory": json.dumps(parallel)}


def test_results_pair_by_function_id_and_arguments_are_checked_against_the_schema():
    row = _rows()[0]
    trajectory = json.loads(row["trajectory"])
    trajectory[2]["function_call"]["arguments"] = '{"city": "Lisbon", "days": "two"}'
    (problem,) = read_conversation({**row, "trajectory": json.dumps(trajectory)}).problems
    assert problem.check is Check.CALL_ARGUMENTS and "'two' is not of type 'integer'" in problem.message
    conv = read_conversation(_parallel_row())
    assert conv.problems == []
    assert [m["tool_call_id"] for m in conv.messages if m["role"] == "tool"] == ["f2", "f1"]


def test_the_parquet_loads_in_verls_sft_dataset_and_trains_only_the_assistant(tmp_path, tiny_tokenizer, capsys):
    from astra_verl.training.sft_dataset import TrajSFTDataset

    src = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([_rows()[0], _parallel_row()]), src)  # read through HF datasets
    out = tmp_path / "sft.parquet"
    argv = ["traj", "import-astra", str(src), "--output-file", str(out), "--parallel-calls", "drop"]
    assert data_synth_main(argv) == 0
    assert "kept 1 to" in (printed := capsys.readouterr().out) and "dropped 1 (parallel calls)" in printed
    ds = TrajSFTDataset(str(out), tiny_tokenizer, {"max_length": 1024})
    assert len(ds) == 1
    item = ds[0]
    live = item["attention_mask"].bool()
    ids, loss = item["input_ids"][live], item["loss_mask"][live].bool()
    trained, untrained = tiny_tokenizer.decode(ids[loss]), tiny_tokenizer.decode(ids[~loss])
    assert '"name": "get_forecast"' in trained and "Tomorrow's high in Lisbon is 75.2 F" in trained
    assert "What is tomorrow's high in Lisbon" in untrained and "75.2 F" in untrained  # the tool result is context


def test_a_missing_input_or_an_unwritable_output_is_one_line_and_exit_2(tmp_path, capsys):
    missing = tmp_path / "ASTRA-SFT-1k.parquet"
    assert data_synth_main(["traj", "import-astra", str(missing), "--output-file", str(tmp_path / "sft.parquet")]) == 2
    assert f"error: no such file: {missing}" in capsys.readouterr().err  # it said: not a .parquet file
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    out = blocker / "sft.parquet"
    assert data_synth_main(["traj", "import-astra", str(FIXTURE), "--output-file", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {blocker}: it already exists and is in the way") and "Traceback" not in err


def test_an_environment_record_is_pointed_at_the_environment_importer():
    envs = Path(__file__).parents[1] / "env_registry" / "data"
    for name in ("astra_env_synthesis.jsonl", "astra_rl_1k.jsonl"):
        conv = read_conversation(json.loads((envs / name).read_text().splitlines()[0]))
        assert conv.format == "environment" and [p.check for p in conv.problems] == [Check.FORMAT]
        assert "env_registry --store STORE import-astra FILE" in conv.problems[0].message
