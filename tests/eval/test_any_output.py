"""No model or server output can abort a run: every parser and writer on the path from a server's
response to a results file turns any input into a value, an error it is documented to raise (and
its caller records), or a line that reads back the same.

The path, per runner:
- `eval bfcl` (FC, the chat rollout): HTTP body (`http._classify`) -> LLM cache (`ResponseCache`)
  -> `Completion.from_response` / `ToolCall.from_openai` -> `chat_rollout.parsed_call` ->
  `CallRecord` / `EpisodeLog` -> `bfcl_score.step_calls` -> `ResultsFile`;
- prompt style (`astra_tool_agent` with `astra_bfcl_qwen`, BFCL's decoder): generated text ->
  `BfclQwenCalls` -> records -> `step_calls` -> results;
- `eval envs` and the training rollout (`astra_tool_agent` with `astra_hermes`): token ids
  (`TokenCompletion.from_response`) -> text -> `HermesCalls` -> records -> `ResultsFile` /
  verl's `extract_tool_calls` (`json.dumps` of each call's arguments).
Drawn: arbitrary JSON values, nesting far past Python's decoder (100,000 levels), lone
surrogates, control characters, long strings. Example counts stay small: seconds, not minutes.
"""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astra_foundation.llm.cache import ResponseCache, cache_key
from astra_foundation.llm.http import _classify
from astra_foundation.llm.types import Completion, LLMUnavailable, TokenCompletion, ToolCall, TransientError, json_text
from astra_verl.benchmarks.bfcl_score import CallStyle, step_calls
from astra_verl.calls.call_log import CallRecord, EpisodeLog
from astra_verl.eval.bfcl_run import BfclResult, results_file
from astra_verl.eval.chat_rollout import parsed_call
from astra_verl.rollout.call_parsing import BfclQwenCalls, HermesCalls, ParsedCall
from env_registry.call_gate import CallStatus

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

DEEP = "[" * 100_000 + "]" * 100_000
# any code point, lone surrogates and control characters included
TEXT = st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF), max_size=40)
ODD = st.sampled_from(["\ud83d", "\udc00x", "\x00", "\x1b[2J", "\u2028", "é", "\U0001f600", "x" * 20_000, DEEP])
STRINGS = TEXT | ODD
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | STRINGS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(STRINGS, inner, max_size=4),
    max_leaves=10,
)


def deep_json(depth: int) -> str:
    return '{"a": ' + "[" * depth + "]" * depth + "}"


ARGUMENT_STRINGS = STRINGS | JSON.map(json_text) | st.sampled_from([DEEP, deep_json(100_000), deep_json(990), ""])


def record(index: int, call: ParsedCall) -> CallRecord:
    args = call.arguments if call.ok else call.raw
    status = CallStatus.OK if call.ok else CallStatus.BAD_JSON
    return CallRecord(turn=1, index=index, tool=call.name, arguments=args, status=status, error_kind=call.error_kind)


def written_and_read_back(tmp_path, records: list[CallRecord], extra) -> None:
    """The episode and anything else in a results record is written and reads back the same."""
    log = EpisodeLog(env_id="e", calls=records)
    path = tmp_path / "results.jsonl"
    path.unlink(missing_ok=True)
    record = BfclResult(
        id="a", category="base", model="m", status="scored", valid=False, episode=log.to_dict(), messages=[extra]
    )
    results_file(path, "m").append(record)
    back = results_file(path).records["a"]
    assert back.episode == json.loads(json_text(log.to_dict()))
    assert back.messages == [json.loads(json_text(extra))]
    EpisodeLog.from_dict(back.episode)  # `bfcl-score` re-scores from it


# -- the FC path ----------------------------------------------------------------------------------


@FAST
@given(name=STRINGS | JSON, arguments=ARGUMENT_STRINGS | JSON)
def test_a_tool_call_of_any_shape_parses_to_a_call_or_an_error(tmp_path, name, arguments):
    call = ToolCall.from_openai({"id": "c", "function": {"name": name, "arguments": arguments}}, 0)
    assert (call.args is None) == (call.error is not None) or not call.arguments.strip()
    parsed = parsed_call(call)
    records = [record(0, parsed)]
    decoded = step_calls(records, CallStyle.FC)
    assert decoded is None or decoded == [f"{call.name}({','.join(f'{k}={v!r}' for k, v in call.args.items())})"]
    written_and_read_back(tmp_path, records, call.model_dump())


def _keys(names: list[str], values) -> st.SearchStrategy:
    return st.dictionaries(st.sampled_from(names), values, max_size=len(names))


_TOOL_CALLS = st.lists(_keys(["id", "function"], _keys(["name", "arguments"], ARGUMENT_STRINGS | JSON) | JSON))
_MESSAGE = _keys(["content", "tool_calls", "reasoning_content", "reasoning"], STRINGS | JSON | _TOOL_CALLS)
_CHOICE = _keys(["message", "finish_reason", "text", "token_ids"], _MESSAGE | JSON)
BODIES = _keys(["choices", "usage", "model"], st.lists(_CHOICE, max_size=2) | JSON)  # _classify returns dicts


@FAST
@given(body=BODIES)
def test_any_response_body_is_a_completion_or_a_value_error(body):
    for kind in (Completion, TokenCompletion):
        try:
            kind.from_response(body, endpoint=None, cached=False, latency_s=0.0)
        except (ValueError, LLMUnavailable):
            pass  # the client retries a malformed response; the runners record LLMUnavailable as an error


@FAST
@given(text=STRINGS | JSON.map(json_text) | st.just(DEEP) | st.just('{"choices": ' + DEEP + "}"))
def test_any_http_body_is_a_completion_body_or_a_transient_error(text):
    try:
        assert isinstance(_classify("http://x", 200, None, text), dict)
    except TransientError:
        pass


@FAST
@given(request=JSON, body=st.dictionaries(STRINGS, JSON, max_size=4))
def test_the_cache_keys_and_stores_anything_and_replays_it_unchanged(tmp_path, request, body):
    cache = ResponseCache(tmp_path / f"{uuid.uuid4().hex}.sqlite")  # INSERT OR IGNORE: one body per key
    try:
        key = cache_key({"messages": request}, 0)
        cache.put(key, body)
        assert cache.get(key) == json.loads(json_text(body))
    finally:
        cache.close()


# -- the prompt path and the training rollout's parser --------------------------------------------

BLOCK_BODIES = st.one_of(
    st.builds(lambda n, a: json_text({"name": n, "arguments": a}), STRINGS | JSON, JSON),
    st.builds(lambda n, a: json_text({"name": n, "arguments": a}), STRINGS, ARGUMENT_STRINGS),
    ARGUMENT_STRINGS,
)
FRAGMENTS = st.one_of(
    BLOCK_BODIES.map(lambda b: f"<tool_call>\n{b}\n</tool_call>"),
    BLOCK_BODIES.map(lambda b: f"<tool_call>{b}</tool_call>"),
    BLOCK_BODIES,
    st.sampled_from(["<tool_call>", "</tool_call>", "<think>", "</think>", "\n", "\r\n"]),
    STRINGS,
)
TEXTS = st.lists(FRAGMENTS, max_size=6).map("".join)


@pytest.mark.parametrize("parser", [BfclQwenCalls(), HermesCalls()], ids=["astra_bfcl_qwen", "astra_hermes"])
@FAST
@given(text=TEXTS)
def test_any_generated_text_parses_records_scores_and_is_written(tmp_path, parser, text):
    turn = parser.parse_text(text)
    records = [record(i, c) for i, c in enumerate(turn.calls)]
    for call in turn.calls:
        if call.ok:
            json.dumps(call.arguments, ensure_ascii=False)  # verl's extract_tool_calls
    if isinstance(parser, BfclQwenCalls):
        step_calls(records, CallStyle.PROMPT)
    written_and_read_back(tmp_path, records, {"content": turn.content, "reasoning": turn.reasoning, "text": text})


@FAST
@given(ids=st.lists(st.integers(), max_size=5) | JSON)
def test_any_token_completion_body_is_a_completion_or_an_error(ids):
    try:
        TokenCompletion.from_response({"choices": [{"token_ids": ids}]}, endpoint=None, cached=False, latency_s=0.0)
    except (ValueError, LLMUnavailable):
        pass


# -- the two crashes, end to end through the results file ---------------------------------


def test_the_two_crashing_replies_are_scored_and_written(tmp_path):
    deep = ToolCall.from_openai({"function": {"name": "ls", "arguments": DEEP}}, 0)
    assert deep.args is None and "RecursionError" in deep.error
    surrogate = ToolCall.from_openai({"function": {"name": "echo", "arguments": '{"x": "\\ud83d"}'}}, 1)
    assert surrogate.args == {"x": "\ud83d"}
    records = [record(0, parsed_call(deep)), record(1, parsed_call(surrogate))]
    assert step_calls(records, CallStyle.FC) is None  # BFCL drops the step: one argument string fails
    assert step_calls(records[1:], CallStyle.FC) == ["echo(x='\\ud83d')"]
    written_and_read_back(tmp_path, records, {"x": "\ud83d"})


@pytest.mark.parametrize("function", [[None], "get_weather", 3, None])
def test_a_call_whose_function_is_not_an_object_is_a_call_without_name_or_arguments(function):
    # Hypothesis found {"function": [None]} once: from_openai called .get on the list.
    body = {"choices": [{"message": {"content": "", "tool_calls": [{"id": "c1", "function": function}]}}]}
    (call,) = Completion.from_response(body, endpoint=None, cached=False, latency_s=0.0).tool_calls
    assert (call.id, call.name, call.arguments, call.args) == ("c1", "", "", {})
