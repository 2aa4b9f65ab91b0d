"""Model-written call statements (`get_weather(city="Paris", days=3)`), parsed safely.

The statement is parsed with `ast` and only literals are accepted (`ast.literal_eval` per
argument, JSON's true/false/null allowed as well): nothing is ever evaluated, so a statement
like `f(x=__import__("os").system("..."))` is rejected, not run. Arguments must be keywords,
values JSON-compatible, the function name the tool's.

`schema_problems` validates the arguments against the tool's JSON Schema; `ungrounded_values`
finds string values that appear nowhere in the request (ASTRA: call values come from the
question), unless the schema allows them explicitly (enum, const, default).
"""

from __future__ import annotations

import ast
from typing import Any

from data_synth.llm.extract import ReplyError, strip_reasoning
from env_registry.arguments import argument_validator
from env_registry.matching import normalize_text

MAX_CALL_CHARS = 20_000
_JSON_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def _literal(node: ast.expr, where: str) -> Any:
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e, where) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise ReplyError("bad_call", f"{where}: `**` inside a dict is not a literal")
            key = _literal(k, where)
            if not isinstance(key, str):
                raise ReplyError("bad_call", f"{where}: dict keys must be strings (JSON objects), got {key!r}")
            out[key] = _literal(v, where)
        return out
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ReplyError(
            "bad_call", f"{where} is not a literal ({ast.unparse(node)[:80]}); write concrete values only"
        ) from None
    if isinstance(value, (set, frozenset, bytes, complex)) or (isinstance(value, float) and value != value):
        raise ReplyError(
            "bad_call", f"{where}: {type(value).__name__} values are not JSON; use strings, numbers, lists"
        )
    return value


def parse_call(text: str, *, name: str | None = None) -> tuple[str, dict[str, Any]]:
    """(function name, keyword arguments) of a call statement; raises ReplyError(kind bad_call)."""
    text = strip_reasoning(text or "").strip().strip("`").strip()
    if text.startswith("python\n"):
        text = text[len("python\n") :]
    text = text.rstrip(";").strip()
    if not text:
        raise ReplyError("bad_call", "the call statement is empty")
    if len(text) > MAX_CALL_CHARS:
        raise ReplyError("bad_call", f"the call statement is {len(text)} characters (limit {MAX_CALL_CHARS})")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, MemoryError, RecursionError, ValueError) as e:
        raise ReplyError("bad_call", f"the call statement does not parse: {getattr(e, 'msg', e)}") from None
    call = tree.body
    # `print(f(...))` is how ASTRA's prompts phrase it: look through one print
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "print"
        and len(call.args) == 1
        and not call.keywords
    ):
        call = call.args[0]
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise ReplyError("bad_call", "write exactly one call of the form name(arg=value, ...)")
    fn = call.func.id
    if name is not None and fn != name:
        raise ReplyError("bad_call", f"the call names {fn!r}; the tool is {name!r}")
    if call.args:
        raise ReplyError("bad_call", "pass every argument by keyword (name=value), not by position")
    args: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise ReplyError("bad_call", "`**kwargs` is not allowed; write each argument")
        args[kw.arg] = _literal(kw.value, f"argument {kw.arg!r}")
    return fn, args


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
