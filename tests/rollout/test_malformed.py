"""Malformed model output: every case ends in a tool message (and a log entry) or a clean end."""

from __future__ import annotations

import json

import pytest

from astra_verl.calls.call_log import EpisodeLog, Termination
from astra_verl.rollout.testing import ScriptedServer, make_loop, run
from env_registry.call_gate import CallStatus

OK, BAD, UNKNOWN, SCHEMA, TOOL_ERR, SKIP = (
    CallStatus.OK,
    CallStatus.BAD_JSON,
    CallStatus.UNKNOWN_TOOL,
    CallStatus.SCHEMA_ERROR,
    CallStatus.TOOL_ERROR,
    CallStatus.SKIPPED,
)


def block(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


def call(name, args) -> str:
    return block(json.dumps({"name": name, "arguments": args}))


CASES = {
    "truncated_block": ('<tool_call>\n{"name": "get_area", "arguments": {"city": ', [(BAD, "unclosed_block")]),
    "unclosed_then_eos": ('I will call <tool_call>{"name": "get_area", "arguments": {}}', [(BAD, "unclosed_block")]),
    "arguments_list": (block('{"name": "get_area", "arguments": ["Paris"]}'), [(BAD, "arguments_not_object")]),
    "arguments_string": (
        block('{"name": "get_area", "arguments": "{\\"city\\": \\"Paris\\"}"}'),
        [(BAD, "arguments_not_object")],
    ),
    "arguments_null": (block('{"name": "get_area", "arguments": null}'), [(BAD, "arguments_not_object")]),
    "not_json": (block("get_area(city='Paris')"), [(BAD, "invalid_json")]),
    "unknown_tool": (call("get_altitude", {"city": "Paris"}), [(UNKNOWN, None)]),
    "wrong_type": (call("get_area", {"city": 3}), [(SCHEMA, "type")]),
    "missing_argument": (call("get_area", {}), [(SCHEMA, "required")]),
    "extra_argument": (call("get_area", {"city": "Paris", "zoom": 2}), [(SCHEMA, "additionalProperties")]),
    "bad_enum": (call("get_area", {"city": "Paris", "unit": "acres"}), [(SCHEMA, "enum")]),
    "value_the_tool_rejects": (call("get_population", {"city": "Atlantis"}), [(TOOL_ERR, "exception")]),
    "nested_tags": (
        "<tool_call>" + call("get_area", {"city": "Paris"}) + "</tool_call>",
        [(BAD, "unclosed_block"), (OK, None)],
    ),
    "dozens_of_calls": (
        "".join(call("get_area", {"city": "Paris"}) for _ in range(30)),
        [(OK, None)] * 4 + [(SKIP, None)] * 26,
    ),
    "mixed_valid_and_broken": (
        call("get_area", {"city": "Paris"}) + block("{oops") + call("nope", {}),
        [(OK, None), (BAD, "invalid_json"), (UNKNOWN, None)],
    ),
}

CLEAN_ENDS = {
    "stray_closing_tag": "I am done </tool_call> really.",
    "empty_turn": "",
    "tags_in_reasoning_only": "<think>I could <tool_call> but no</think>Paris has 2161000 people.",
}


@pytest.fixture(scope="module")
def cfg(trainer_config):
    return trainer_config("actor_rollout_ref.rollout.response_length=4096")  # room for dozens of calls


def episode(cfg, tokenizer, script, row):
    server = ScriptedServer(tokenizer, script)
    out = run(make_loop(cfg, server, tokenizer).run({}, **row))
    return out, EpisodeLog.from_extra_fields(out.extra_fields)


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_calls_become_tool_messages(case, cfg, tiny_tokenizer, envs, kit):
    text, expected = CASES[case]
    out, log = episode(cfg, tiny_tokenizer, [text, "Giving up."], kit.row_kwargs(envs.city, envs.store))
    assert [(c.status, c.error_kind) for c in log.calls] == expected
    assert (log.terminated_by, log.assistant_turns, log.final_answer) == (Termination.NO_TOOL_CALL, 2, "Giving up.")
    # one tool response per attempt, in order, each carrying what the log recorded
    responses = tiny_tokenizer.decode(out.response_ids).split("<tool_response>\n")[1:]
    assert len(responses) == len(expected)
    for c, r in zip(log.calls, responses, strict=True):
        assert r.startswith(c.output)
        if c.status is not OK:
            assert c.output.startswith(("Error (", "Not executed"))
    assert log.num_calls == sum(1 for s, _ in expected if s is not SKIP)


@pytest.mark.parametrize("case", sorted(CLEAN_ENDS))
def test_clean_end_without_calls(case, cfg, tiny_tokenizer, envs, kit):
    out, log = episode(cfg, tiny_tokenizer, [CLEAN_ENDS[case], "never reached"], kit.row_kwargs(envs.city, envs.store))
    assert (log.calls, log.assistant_turns, log.terminated_by) == ([], 1, Termination.NO_TOOL_CALL)
    if case == "tags_in_reasoning_only":
        assert log.final_answer == "Paris has 2161000 people."


def test_huge_arguments_are_checked_run_and_truncated(trainer_config, tiny_tokenizer, envs, kit):
    cfg = trainer_config("actor_rollout_ref.rollout.response_length=16384")
    huge = "Atlantis" * 2500
    out, log = episode(
        cfg, tiny_tokenizer, [call("get_population", {"city": huge}), "ok"], kit.row_kwargs(envs.city, envs.store)
    )
    (c,) = log.calls
    assert (c.status, c.error_kind, c.arguments) == (TOOL_ERR, "exception", {"city": huge})
    assert len(c.output) <= 512 + len("...(truncated)...")  # max_tool_response_length
    assert c.output_sha and log.terminated_by is Termination.NO_TOOL_CALL
