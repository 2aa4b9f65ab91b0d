"""The reporting hermes parser: every `<tool_call>` attempt is reported, well-formed or not."""

from __future__ import annotations

import json

import pytest
from verl.experimental.agent_loop.tool_parser import ToolParser

from astra_verl.rollout.call_parsing import reporting_parser
from astra_verl.rollout.tool_parser import HermesReportingParser


@pytest.fixture(scope="module")
def parser(tiny_tokenizer):
    return HermesReportingParser(tiny_tokenizer)


def parse_tokens(parser, tokenizer, text):
    ids = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    return parser.parse(ids)


def test_well_formed_calls_and_content(parser, tiny_tokenizer):
    text = 'Let me look.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>\n<tool_call>{"name": "g", "arguments": {}}</tool_call>'
    turn = parse_tokens(parser, tiny_tokenizer, text)
    assert turn.content == "Let me look."
    assert [(c.name, c.arguments, c.ok) for c in turn.calls] == [("f", {"a": 1}, True), ("g", {}, True)]


@pytest.mark.parametrize(
    ("block", "kind", "name"),
    [
        ('{"name": "f", "arguments": [1, 2]}', "arguments_not_object", "f"),
        ('{"name": "f", "arguments": "{\\"a\\": 1}"}', "arguments_not_object", "f"),
        ('{"name": "f", "arguments": null}', "arguments_not_object", "f"),
        ('{"name": "f"}', "arguments_not_object", "f"),
        ('{"name": "", "arguments": {}}', "missing_name", None),
        ('{"name": 3, "arguments": {}}', "missing_name", None),
        ('{"arguments": {}}', "missing_name", None),
        ("[1, 2]", "not_an_object", None),
        ('"f"', "not_an_object", None),
        ('{"name": "f" "arguments": {}}', "invalid_json", None),
        ("", "invalid_json", None),
    ],
)
def test_malformed_block_is_reported(parser, block, kind, name):
    turn = parser.parse_text(f"<tool_call>{block}</tool_call>")
    assert len(turn.calls) == 1
    call = turn.calls[0]
    assert (call.ok, call.error_kind, call.name, call.arguments) == (False, kind, name, None)
    assert call.error.startswith("Malformed tool call")
    assert call.raw == block


def test_unclosed_block_runs_to_the_end(parser, tiny_tokenizer):
    turn = parse_tokens(parser, tiny_tokenizer, 'ok <tool_call>{"name": "f", "arguments": {"a": ')
    assert turn.content == "ok"
    assert [c.error_kind for c in turn.calls] == ["unclosed_block"]
    assert "no closing" in turn.calls[0].error


def test_nested_open_tag_is_one_bad_attempt_then_the_inner_call(parser):
    turn = parser.parse_text('<tool_call><tool_call>{"name": "f", "arguments": {}}</tool_call></tool_call> tail')
    assert [(c.error_kind, c.name) for c in turn.calls] == [("unclosed_block", None), (None, "f")]
    assert turn.content == "</tool_call> tail"  # the stray closing tag stays visible as text


def test_dozens_of_calls_and_huge_arguments(parser):
    calls = "".join(f'<tool_call>{{"name": "t{i}", "arguments": {{"i": {i}}}}}</tool_call>' for i in range(40))
    assert [c.arguments["i"] for c in parser.parse_text(calls).calls] == list(range(40))
    big = "x" * 200_000
    turn = parser.parse_text(f'<tool_call>{{"name": "f", "arguments": {{"blob": "{big}"}}}}</tool_call>')
    assert turn.calls[0].arguments == {"blob": big}


def test_reasoning_is_split_off(parser):
    turn = parser.parse_text('<think>maybe <tool_call>{"name": "f", "arguments": {}}</tool_call>?</think>Answer: 42')
    assert (turn.reasoning.startswith("maybe"), turn.content, turn.calls) == (True, "Answer: 42", [])
    unfinished = parser.parse_text("<think>still thinking <tool_call>")
    assert (unfinished.content, unfinished.calls) == ("", [])


def test_no_calls_is_plain_content(parser):
    turn = parser.parse_text("  The answer is 42.  ")
    assert (turn.content, turn.has_calls) == ("The answer is 42.", False)


def test_verl_interface_returns_only_valid_calls(parser, tiny_tokenizer):
    from verl.utils.ray_utils import get_event_loop

    text = '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call><tool_call>{"name": "g", "arguments": 5}</tool_call>'
    ids = tiny_tokenizer.encode(text, add_special_tokens=False)
    content, calls = get_event_loop().run_until_complete(parser.extract_tool_calls(ids))
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("f", {"a": 1})]


def test_registry_refuses_silent_parsers(tiny_tokenizer):
    registry = ToolParser._registry  # what astra_tool_agent picks its parser from
    assert isinstance(reporting_parser("astra_hermes", tiny_tokenizer, registry), HermesReportingParser)
    with pytest.raises(ValueError, match="drops malformed calls silently"):
        reporting_parser("hermes", tiny_tokenizer, registry)
    with pytest.raises(ValueError, match="no tool parser named"):
        reporting_parser("nope", tiny_tokenizer, registry)
