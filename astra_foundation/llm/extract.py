"""Pull JSON or code out of what a model wrote. Pure functions, no I/O.

Models wrap their answer in prose, markdown fences and reasoning blocks (`<think>...</think>`,
or only the closing tag when the chat template opened the block inside the prompt). Both
extractors strip reasoning first, then prefer fenced blocks, then the bare text. They raise
`ExtractError` with a message meant to be shown back to the model in a repair round: what was
wrong and where, never the whole reply.
"""

from __future__ import annotations

import json
import re
from typing import Any

_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)
_SNIPPET = 160
_MAX_STARTS = 64  # bracket positions tried when the JSON is embedded in prose


class ReplyError(ValueError):
    """A reply that cannot be used. `kind` is a short stable code (counted in funnels); the
    message is shown to the model in a repair round. Checks passed to
    `LLMClient.complete_json(check=...)` raise it (or any ValueError, kind `failed_check`)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class ExtractError(ReplyError):
    """The reply holds no usable JSON / code."""


def strip_reasoning(text: str) -> str:
    """Drop reasoning blocks: complete `<think>` blocks, everything before a lone `</think>`,
    and an unterminated `<think>` with all that follows (the model ran out of tokens thinking)."""
    text = _THINK_BLOCK.sub("", text)
    lower = text.lower()
    close = lower.rfind("</think>")
    if close >= 0:
        text = text[close + len("</think>") :]
        lower = text.lower()
    opening = lower.find("<think>")
    if opening >= 0:
        text = text[:opening]
    return text.strip()


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "..."


def _fenced(text: str) -> list[tuple[str, str]]:
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def _decode_first(text: str) -> tuple[Any, json.JSONDecodeError | None]:
    """The first JSON object or array that decodes, scanning opening brackets left to right."""
    decoder = json.JSONDecoder()
    first_error: json.JSONDecodeError | None = None
    starts = [i for i, ch in enumerate(text) if ch in "{["][:_MAX_STARTS]
    for i in starts:
        try:
            value, _ = decoder.raw_decode(text, i)
            return value, None
        except json.JSONDecodeError as e:
            first_error = first_error or e
    return None, first_error


def extract_json(text: str, *, expect: type | None = dict) -> Any:
    """The JSON value the reply carries. `expect` (dict, list or None for any) is enforced.

    Raises `ExtractError` with kind `empty`, `no_json` (prose, refusals), `truncated` (the
    JSON starts but does not end) or `wrong_type`.
    """
    body = strip_reasoning(text or "")
    if not body:
        raise ExtractError("empty", "the reply is empty (after removing any <think> block)")
    candidates = [code for lang, code in _fenced(body) if lang in ("", "json", "jsonc", "javascript")]
    candidates.append(body)
    first_error: json.JSONDecodeError | None = None
    for candidate in candidates:
        candidate = candidate.strip()
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            value, err = _decode_first(candidate)
            if err is not None and value is None:
                first_error = first_error or err
                continue
            if value is None:
                continue
        if expect is not None and not isinstance(value, expect):
            raise ExtractError(
                "wrong_type",
                f"expected a JSON {expect.__name__}, got a JSON {type(value).__name__}: {_snippet(candidate)}",
            )
        return value
    if first_error is not None:
        raise ExtractError(
            "truncated",
            f"the JSON does not parse ({first_error.msg} at line {first_error.lineno} column {first_error.colno}); "
            "it may be truncated or contain trailing commas or comments",
        )
    raise ExtractError("no_json", f"no JSON object found in the reply: {_snippet(body)}")


def extract_code(text: str, *, language: str = "python") -> str:
    """The code block of `language` (or an untagged fence); the bare reply when there is no
    fence at all. Raises `ExtractError` (kind `empty` or `no_code`)."""
    body = strip_reasoning(text or "")
    if not body:
        raise ExtractError("empty", "the reply is empty (after removing any <think> block)")
    blocks = _fenced(body)
    for lang, code in blocks:
        if lang in (language, language[:2], "") and code.strip():
            return code.strip("\n") + "\n"
    if blocks:
        raise ExtractError("no_code", f"no ```{language} block in the reply (found: {[lang for lang, _ in blocks]})")
    return body + "\n"
