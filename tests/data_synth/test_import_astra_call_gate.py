"""`traj import-astra` checks each call with RL's own pre-call check (`env_registry.call_gate`),
so an imported SFT conversation never shows a call RL refuses: empty arguments are a malformed
call (not `{}`), and a `format` the schema asserts (a date, an email) is checked as RL checks it."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from data_synth.traj.astra_import import Check, read_conversation, run_import
from env_registry.arguments import argument_validator
from env_registry.call_gate import check_call

PARAMETERS = {
    "type": "object",
    "properties": {"day": {"type": "string", "format": "date"}},
}
TOOLS = [{"type": "function", "function": {"name": "forecast", "description": "By day.", "parameters": PARAMETERS}}]


def _row(arguments: str) -> dict:
    call = {"id": "c1", "type": "function", "function": {"name": "forecast", "arguments": arguments}}
    messages = [
        {"role": "user", "content": "Tomorrow's forecast?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "name": "forecast", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
    ]
    return {"messages": json.dumps(messages), "tools": json.dumps(TOOLS)}


def _rl_refusal(arguments: dict | None, error: str = "") -> str:
    refusal = check_call("forecast", arguments, ["forecast"], lambda _: argument_validator(PARAMETERS), error=error)
    assert refusal is not None
    return refusal.text


def test_empty_arguments_are_a_malformed_call_as_in_rl():
    (problem,) = read_conversation(_row("")).problems
    assert problem.check is Check.CALL_MALFORMED and problem.where == "messages[1].tool_calls[0]"
    assert "arguments are empty; send a JSON object" in problem.message
    assert problem.message.startswith("Error (bad_json): ")  # RL's refusal, word for word


def test_a_format_violation_is_refused_as_rl_refuses_it():
    (problem,) = read_conversation(_row('{"day": "next tuesday"}')).problems
    assert problem.check is Check.CALL_ARGUMENTS
    assert problem.message == _rl_refusal({"day": "next tuesday"})
    assert "'next tuesday' is not a 'date'" in problem.message
    assert read_conversation(_row('{"day": "2025-06-01"}')).problems == []


def test_the_refused_rows_are_not_written(tmp_path):
    source = tmp_path / "in.jsonl"
    rows = [_row('{"day": "2025-06-01"}'), _row(""), _row('{"day": "soon"}')]
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "sft.parquet"
    counts = run_import([str(source)], out, tmp_path / "rejects.jsonl")
    assert (counts["kept"], counts["rejected"]) == (1, 2)
    assert counts["checks"] == {"call_malformed": 1, "call_arguments": 1}
    (kept,) = pq.read_table(out).to_pylist()
    assert kept["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"day": "2025-06-01"}'
