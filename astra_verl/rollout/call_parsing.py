"""Tool-call parsing that reports malformed calls instead of dropping them (no verl here).

verl's `hermes` parser logs and drops any `<tool_call>` block it cannot decode, so a model
that writes broken calls is never told and never charged for them. ASTRA's reward charges
precision for every call the model attempts, so `astra_tool_agent` needs every attempt:
`ReportingParser.parse` returns a `ParsedTurn` with one `ParsedCall` per call block,
well-formed or not, and the loop turns each malformed one into a tool message and a log entry.

This module imports nothing of verl: the toolset, the chat rollout and the agent loop read
`ParsedCall`/`ParsedTurn` from here. `astra_verl.rollout.tool_parser` makes the parsers verl
`ToolParser`s and registers them (`astra_<format>`); importing verl first loads our plugin, so a
module every part imports must not import verl (see `astra_verl.plugin`).

Hermes rules (one rule per case, all tested):
- every `<tool_call>` opening tag is one call attempt;
- a block is the text up to the next `</tool_call>`; a block with no closing tag, or with
  another `<tool_call>` before its closing tag, is malformed (`unclosed_block`); parsing
  goes on at that next opening tag, if any;
- the block must be one JSON object `{"name": str, "arguments": object}`; anything else is
  malformed (`invalid_json`, `not_an_object`, `missing_name`, `arguments_not_object`);
- text outside the blocks (stray closing tags included) is the turn's content;
- a leading reasoning block `<think>...</think>` (Qwen3 style) is split off first: tags inside
  it are thoughts, not calls, and it is not part of the content (the final answer). An
  unfinished `<think>` makes the whole turn reasoning.

`BfclQwenCalls` (`astra_bfcl_qwen`) is the other parser: it decodes a step exactly as BFCL's
`QwenFCHandler` does (BFCL evaluation in prompt style; see its docstring and docs/bfcl.md).
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from env_registry import call_errors
from env_registry.episode_driver import ParsedCall  # one call attempt, as the episode driver reads it

_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


@dataclass(frozen=True)
class ParsedTurn:
    content: str  # the text outside call blocks and reasoning, stripped
    calls: list[ParsedCall] = field(default_factory=list)
    reasoning: str = ""  # a leading <think> block's text

    @property
    def has_calls(self) -> bool:
        return bool(self.calls)


class ReportingParser(ABC):
    """A tool parser that also reports malformed call blocks (see `parse`); `tokenizer` decodes."""

    tokenizer: Any

    @abstractmethod
    def parse_calls(self, text: str) -> ParsedTurn:
        """Split (reasoning-free) assistant text into content and call attempts; never raises."""

    def parse_text(self, text: str) -> ParsedTurn:
        reasoning, rest = split_reasoning(text)
        turn = self.parse_calls(rest)
        return ParsedTurn(content=turn.content, calls=turn.calls, reasoning=reasoning)

    def decode(self, response_ids: list[int]) -> str:
        # Tool tags are added, non-special tokens in Qwen-style tokenizers, so they survive
        # skip_special_tokens while end-of-turn markers do not leak into content.
        return self.tokenizer.decode(response_ids, skip_special_tokens=True)

    def parse(self, response_ids: list[int]) -> ParsedTurn:
        return self.parse_text(self.decode(response_ids))


def split_reasoning(text: str) -> tuple[str, str]:
    """(reasoning, rest) of an assistant turn that may open with a `<think>` block."""
    stripped = text.lstrip()
    if not stripped.startswith(_THINK_OPEN):
        return "", text
    body = stripped[len(_THINK_OPEN) :]
    end = body.find(_THINK_CLOSE)
    if end < 0:
        return body.strip(), ""
    return body[:end].strip(), body[end + len(_THINK_CLOSE) :]


class HermesCalls(ReportingParser):
    """Hermes / Qwen2.5 / Qwen3 format: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`."""

    open_tag = "<tool_call>"
    close_tag = "</tool_call>"

    def parse_calls(self, text: str) -> ParsedTurn:
        calls: list[ParsedCall] = []
        content: list[str] = []
        pos = 0
        while True:
            start = text.find(self.open_tag, pos)
            if start < 0:
                content.append(text[pos:])
                break
            content.append(text[pos:start])
            body_start = start + len(self.open_tag)
            end = text.find(self.close_tag, body_start)
            reopen = text.find(self.open_tag, body_start)
            if end < 0 or 0 <= reopen < end:
                nested = reopen >= 0  # the next attempt starts at the inner opening tag
                stop = reopen if nested else len(text)
                why = "another <tool_call> opens before it closes" if nested else "it has no closing </tool_call>"
                calls.append(
                    ParsedCall(
                        name=None,
                        arguments=None,
                        raw=text[body_start:stop],
                        error_kind="unclosed_block",
                        error=f"Malformed tool call: {why}. Write each call as <tool_call>{{...}}</tool_call>.",
                    )
                )
                if not nested:
                    break
                pos = reopen
                continue
            calls.append(self._parse_block(text[body_start:end]))
            pos = end + len(self.close_tag)
        return ParsedTurn(content="".join(content).strip(), calls=calls)

    @staticmethod
    def _parse_block(raw: str) -> ParsedCall:
        def bad(kind: str, why: str, name: str | None = None) -> ParsedCall:
            return ParsedCall(name=name, arguments=None, raw=raw, error_kind=kind, error=call_errors.malformed(why))

        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the decoder goes
            return ParsedCall(
                name=None, arguments=None, raw=raw, error_kind="invalid_json", error=call_errors.not_json(exc)
            )
        if not isinstance(obj, dict):
            return bad(
                "not_an_object", f'expected a JSON object {{"name": ..., "arguments": {{...}}}}, got {_kind(obj)}'
            )
        name = obj.get("name")
        if not isinstance(name, str) or not name.strip():
            return bad("missing_name", 'the object needs a "name" string')
        if "arguments" not in obj:
            return bad("arguments_not_object", f'the call to {name!r} has no "arguments" object', name)
        args = obj["arguments"]
        if not isinstance(args, dict):
            return bad(
                "arguments_not_object", f'"arguments" of {name!r} must be a JSON object, got {_kind(args)}', name
            )
        return ParsedCall(name=name, arguments=args, raw=raw)


# -- BFCL's QwenFCHandler, rule for rule ------------------------------------------------------

# bfcl_eval.model_handler.local_inference.qwen_fc.QwenFCHandler._extract_tool_calls: a block is
# only what this pattern matches (newlines inside both tags; the first `\n</tool_call>` ends it).
QWEN_FC_BLOCK = re.compile(r"<tool_call>\n(.*?)\n</tool_call>", re.DOTALL)
BFCL_SKIPPED = "bfcl_skipped_block"  # BFCL skips this block (not JSON): the other calls stand
BFCL_DROPPED = "bfcl_dropped_step"  # BFCL's decoder raises on this step: none of its calls is run


def qwen_fc_split(text: str) -> tuple[str, str]:
    """(reasoning, response) of a generation, as `QwenFCHandler._parse_query_response_prompting`
    splits it: with any `</think>`, the response is the text after the last one (leading
    newlines removed) and the reasoning what precedes the first one, after its last `<think>`."""
    if "</think>" not in text:
        return "", text
    parts = text.split("</think>")
    return parts[0].rstrip("\n").split("<think>")[-1].lstrip("\n"), parts[-1].lstrip("\n")


def qwen_fc_call(item: Any) -> tuple[str, dict[str, Any], str]:
    """(name, arguments, BFCL's call string) of one decoded block; raises wherever
    `QwenFCHandler.decode_execute` + `convert_to_function_call` raise on it."""
    if type(item) is not dict:  # noqa: E721 - BFCL's own test: `type(item) != dict`
        raise ValueError("Model did not return a list of function calls")
    name, arguments = item["name"], item["arguments"]
    hash(name)  # BFCL makes the name a dict key: a list or object raises TypeError
    if type(arguments) is str:  # noqa: E721 - BFCL: `type(value) == str`
        arguments = json.loads(arguments)
    pairs = arguments.items()  # AttributeError on anything but an object, as in BFCL
    call = f"{name}({','.join([f'{k}={v!r}' for k, v in pairs])})"
    return f"{name}", arguments, call


class BfclQwenCalls(ReportingParser):
    """A step decoded exactly as BFCL's `QwenFCHandler` decodes it (BFCL evaluation, prompt style).

    Where the lenient hermes parser above reports every `<tool_call>` attempt, this one runs
    BFCL's rules on the full generated text: the response is the text after the last
    `</think>` (`qwen_fc_split`); a call block is only `<tool_call>\n...\n</tool_call>`; a block
    that is not JSON is skipped alone (`bfcl_skipped_block`); a JSON block that is not
    `{"name": hashable, "arguments": object or JSON-object string}` makes BFCL's decoder raise,
    and then no call of the step runs (every block `bfcl_dropped_step`). A call's name is
    BFCL's `f"{name}"`. The loop therefore runs the calls BFCL runs, in BFCL's order, and the
    scorer's `step_calls` reads back BFCL's decoding from the records. Never raises."""

    def parse_text(self, text: str) -> ParsedTurn:
        reasoning, response = qwen_fc_split(text)
        content = QWEN_FC_BLOCK.sub("", response).strip()
        blocks = QWEN_FC_BLOCK.findall(response)
        calls: list[ParsedCall] = []
        try:  # BFCL decodes every block, then raises on the first bad one: dropping is all-or-nothing
            for raw in blocks:
                try:
                    item = json.loads(raw)
                except Exception as exc:  # noqa: BLE001 - as BFCL: any failure skips the block alone
                    calls.append(ParsedCall(None, None, raw, BFCL_SKIPPED, call_errors.not_json(exc)))
                    continue
                name, arguments, _ = qwen_fc_call(item)
                calls.append(ParsedCall(name, arguments, raw))
        except Exception as exc:  # noqa: BLE001 - BFCL drops the step on any exception of its decoder
            why = call_errors.malformed(
                f"BFCL's decoder rejects this step ({type(exc).__name__}: {str(exc)[:200]}); every block must be "
                '{"name": ..., "arguments": {...}}; no call of this step was run'
            )
            return ParsedTurn(content, [ParsedCall(None, None, raw, BFCL_DROPPED, why) for raw in blocks], reasoning)
        return ParsedTurn(content, calls, reasoning)

    def parse_calls(self, text: str) -> ParsedTurn:
        return self.parse_text(text)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def reporting_parser(name: str, tokenizer: Any, registry: Mapping[str, type]) -> ReportingParser:
    """The parser `name` of `registry` (verl's `ToolParser` registry); it must report malformed calls."""
    cls = registry.get(name)
    if cls is None:
        known = sorted(n for n, c in registry.items() if issubclass(c, ReportingParser))
        raise ValueError(f"no tool parser named {name!r} is registered; astra_tool_agent can use {known}")
    if not issubclass(cls, ReportingParser):
        raise ValueError(
            f"tool parser {name!r} ({cls.__name__}) drops malformed calls silently; astra_tool_agent needs a "
            "ReportingParser (e.g. 'astra_hermes') so every attempted call is logged and charged"
        )
    return cls(tokenizer)
