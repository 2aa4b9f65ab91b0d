"""Each step is decoded exactly as BFCL's own handler decodes it, in both call styles.

Ours: PROMPT, the generated text through `astra_bfcl_qwen` (`BfclQwenCalls`, what the BFCL eval
recipe's `astra_tool_agent` parses with) and the scorer's `step_calls`; FC, the OpenAI tool calls
through the LLM client's `ToolCall`, the chat rollout's `parsed_call` and `step_calls`. BFCL's:
its `QwenFCHandler` (think split + `decode_execute`) and its OpenAI handler, run in this process
(`bfcl_direct.bfcl_in_process`). Both must give the same call strings, or both drop the step.
The named cases are the differences an outside audit found; the properties draw texts
from the fragments those cases are made of.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astra_foundation.llm.types import ToolCall
from astra_verl.benchmarks.bfcl_score import CallStyle, step_calls
from astra_verl.calls.call_log import CallRecord
from astra_verl.eval.chat_rollout import parsed_call
from astra_verl.rollout.call_parsing import BfclQwenCalls, ParsedCall
from env_registry.call_gate import CallStatus

sys.path.insert(0, str(Path(__file__).parent))
from bfcl_direct import bfcl_in_process, decode_step  # noqa: E402

PARSER = BfclQwenCalls()


def record(index: int, call: ParsedCall) -> CallRecord:
    """The record `ToolCatalog.execute` leaves for a call attempt (status as far as decoding cares)."""
    if call.ok:
        return CallRecord(turn=1, index=index, tool=call.name, arguments=call.arguments, status=CallStatus.OK)
    return CallRecord(
        turn=1, index=index, tool=call.name, arguments=call.raw, status=CallStatus.BAD_JSON, error_kind=call.error_kind
    )


def ours(style: str, response) -> list[str] | None:
    if style == "prompt":
        calls = PARSER.parse_text(response).calls
    elif isinstance(response, list):
        calls = [parsed_call(ToolCall.from_openai(c, i)) for i, c in enumerate(as_openai(response))]
    else:
        calls = []  # content only: no tool call
    return step_calls([record(i, c) for i, c in enumerate(calls)], CallStyle(style)) if calls else None


def as_openai(fc: list[dict]) -> list[dict]:
    """BFCL's FC record of a reply (`[{name: arguments}]`) as the server's tool calls."""
    return [{"id": f"c{i}", "function": {"name": n, "arguments": a}} for i, c in enumerate(fc) for n, a in c.items()]


@pytest.fixture(scope="module")
def bfcl():
    with bfcl_in_process() as (handlers, is_empty):
        yield lambda style, response: decode_step(handlers, is_empty, style, response)


def block(body: str) -> str:
    return f"<tool_call>\n{body}\n</tool_call>"


def call(name, args) -> str:
    return json.dumps({"name": name, "arguments": args})


TOUCH = call("touch", {"file_name": "a.txt"})
MKDIR = call("mkdir", {"dir_name": "d"})
LONG = json.dumps({"name": "echo", "arguments": json.dumps({"content": "x" * 5000, "file_name": "f.txt"})})

# The eleven kinds (each row: our old verdict differed from BFCL's), and a few neighbours.
CASES = {
    "no_newlines_inside_tags": f"<tool_call>{TOUCH}</tool_call>",
    "crlf_line_ends": f"<tool_call>\r\n{TOUCH}\r\n</tool_call>",
    "first_block_without_newline_before_close": f"<tool_call>\n{TOUCH}</tool_call>\n{block(MKDIR)}\n{block(TOUCH)}",
    "unclosed_block_then_good_blocks": f"<tool_call>\n{TOUCH}\n{block(MKDIR)}\n{block(TOUCH)}",
    "close_tag_inside_a_string_argument": block(call("echo", {"content": "a</tool_call>b", "file_name": "f"})),
    "name_is_a_list": block(call(["pwd"], {})) + "\n" + block(MKDIR),
    "name_is_an_object": block(call({"n": "pwd"}, {})) + "\n" + block(MKDIR),
    "string_arguments_over_4096_chars": block(LONG),
    "think_close_without_open": f"I plan.\n{block(MKDIR)}\n</think>\n\n{block(TOUCH)}",
    "unclosed_think": f"<think>\nplanning {block(MKDIR)}",
    "two_think_blocks": f"<think>a</think>{block(MKDIR)}<think>b</think>\n{block(TOUCH)}",
    "64_read_only_calls_then_ground_truth": "\n".join([block(call("pwd", {}))] * 64 + [block(MKDIR), block(TOUCH)]),
    # neighbours
    "invalid_json_block_is_skipped_alone": block('{"name": "ls", "arguments": {') + "\n" + block(MKDIR),
    "string_arguments_not_json": block(json.dumps({"name": "ls", "arguments": "{no"})) + "\n" + block(MKDIR),
    "arguments_a_list": block(call("ls", [1])) + "\n" + block(MKDIR),
    "numeric_name": block(call(7, {})),
    "missing_arguments": block(json.dumps({"name": "ls"})),
    "no_call": "All done.",
    "deep_nesting": block('{"name": "ls", "arguments": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"),
    "lone_surrogate": block('{"name": "echo", "arguments": {"content": "\\ud83d"}}'),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_prompt_step_decodes_as_bfcls_qwen_handler(bfcl, name):
    text = CASES[name]
    assert ours("prompt", text) == bfcl("prompt", text)


def test_the_cases_cover_both_outcomes(bfcl):
    """The cases are not all drops (or all decodes): BFCL decodes some and drops others."""
    outcomes = {name: bfcl("prompt", text) for name, text in CASES.items()}
    assert outcomes["no_newlines_inside_tags"] is None and outcomes["name_is_a_list"] is None
    assert outcomes["close_tag_inside_a_string_argument"] == ["echo(content='a</tool_call>b',file_name='f')"]
    assert len(outcomes["64_read_only_calls_then_ground_truth"]) == 66
    assert outcomes["unclosed_think"] == ["mkdir(dir_name='d')"]
    assert outcomes["two_think_blocks"] == ["touch(file_name='a.txt')"]


FC_CASES = {
    "good": [{"cd": '{"folder": "a"}'}],
    "truncated": [{"cd": '{"folder": "a"}'}, {"ls": '{"a": tr'}],
    "empty": [{"ls": ""}],
    "list": [{"ls": "[1]"}],
    "deep": [{"ls": "[" * 100_000 + "]" * 100_000}],
    "deep_object": [{"ls": '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"}],
    "surrogate": [{"echo": '{"content": "\\ud83d"}'}],
    "huge_int": [{"ls": '{"a": ' + "9" * 5000 + "}"}],
    "content_only": "Done.",
}


@pytest.mark.parametrize("name", sorted(FC_CASES))
def test_fc_step_decodes_as_bfcls_openai_handler(bfcl, name):
    assert ours("fc", FC_CASES[name]) == bfcl("fc", FC_CASES[name])


# -- properties: texts made of the fragments the cases above are made of ------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_NAMES = st.sampled_from(["ls", "cd", "mkdir"]) | _JSON
_BLOCK_BODY = st.one_of(
    st.builds(lambda n, a: json.dumps({"name": n, "arguments": a}), _NAMES, _JSON),
    st.builds(lambda n, a: json.dumps({"name": n, "arguments": json.dumps(a)}), _NAMES, _JSON),
    _JSON.map(json.dumps),
    st.text(max_size=12),
)
_FRAGMENTS = st.one_of(
    _BLOCK_BODY.map(block),
    _BLOCK_BODY,
    st.sampled_from(["<tool_call>", "</tool_call>", "<tool_call>\n", "\n</tool_call>", "<think>", "</think>"]),
    st.sampled_from(["\n", "\r\n", " ", "text", '"', "\\"]),
)
_TEXTS = st.lists(_FRAGMENTS, max_size=8).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_TEXTS)
def test_any_text_decodes_as_bfcls_qwen_handler(bfcl, text):
    assert ours("prompt", text) == bfcl("prompt", text)


_ARG_STRINGS = st.one_of(_JSON.map(json.dumps), st.text(max_size=16), st.just(""), st.just("[" * 5000))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(st.sampled_from(["ls", "cd"]), _ARG_STRINGS), min_size=1, max_size=4))
def test_any_tool_calls_decode_as_bfcls_openai_handler(bfcl, calls):
    fc = [{n: a} for n, a in calls]
    assert ours("fc", fc) == bfcl("fc", fc)
