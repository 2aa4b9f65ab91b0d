"""Model-written call statements (`get_weather(city="Paris", days=3)`), parsed safely.

`parse_call` reads the call out of a model's reply with `env_registry.calls` (`ast`, literals
only: nothing is ever evaluated, so a statement like `f(x=__import__("os").system("..."))` is
rejected, not run). Arguments must be keywords, values JSON-compatible, the function name the
tool's.

`schema_problems` validates the arguments against the tool's JSON Schema; `ungrounded_values`
finds string values that appear nowhere in the request (ASTRA: call values come from the
question), unless the schema allows them explicitly (enum, const, default).
"""

from __future__ import annotations

from typing import Any

from astra_foundation.llm.extract import ReplyError, strip_reasoning
from env_registry.arguments import argument_validator
from env_registry.calls import CallStatementError, parse_call_statement
from env_registry.matching import normalize_text


def parse_call(text: str, *, name: str | None = None) -> tuple[str, dict[str, Any]]:
    """(function name, keyword arguments) of a call statement in a model's reply (reasoning and
    code fences stripped); raises ReplyError(kind bad_call). The parser is `env_registry.calls`."""
    try:
        return parse_call_statement(strip_reasoning(text or ""), name=name)
    except CallStatementError as e:
        raise ReplyError("bad_call", str(e)) from None


def schema_problems(args: dict[str, Any], parameters: dict[str, Any]) -> list[str]:
    validator = argument_validator(parameters)
    return [
        f"{'.'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}"
        for e in sorted(validator.iter_errors(args), key=lambda e: list(e.absolute_path))
    ]


def _allowed(schema: dict[str, Any] | None) -> list[Any]:
    if not isinstance(schema, dict):
        return []
    values = list(schema.get("enum") or [])
    for k in ("const", "default"):
        if k in schema:
            values.append(schema[k])
    return values


def _strings(value: Any, schema: dict[str, Any] | None, path: str):
    if isinstance(value, str):
        yield path, value, schema
    elif isinstance(value, list):
        items = schema.get("items") if isinstance(schema, dict) else None
        for i, v in enumerate(value):
            yield from _strings(v, items, f"{path}[{i}]")
    elif isinstance(value, dict):
        props = (schema or {}).get("properties", {}) if isinstance(schema, dict) else {}
        for k, v in value.items():
            yield from _strings(v, props.get(k), f"{path}.{k}")


def ungrounded_values(args: dict[str, Any], parameters: dict[str, Any], context: str) -> list[str]:
    """`arg=value` for each string value found neither in `context` nor allowed by the schema."""
    haystack = normalize_text(context)
    props = parameters.get("properties", {}) if isinstance(parameters, dict) else {}
    out = []
    for key, value in args.items():
        for path, text, schema in _strings(value, props.get(key), key):
            if text in _allowed(schema) or text in _allowed(props.get(key)):
                continue
            needle = normalize_text(text)
            if needle.strip() and needle not in haystack:
                out.append(f"{path}={text!r}")
    return out
