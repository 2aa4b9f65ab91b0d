"""Call statements (`get_weather(city="Paris", days=3)`), parsed safely into a tool name and
JSON arguments.

The statement is parsed with `ast` and only literals are accepted (`ast.literal_eval` per
argument, JSON's true/false/null allowed as well): nothing is ever evaluated, so a statement
like `f(x=__import__("os").system("..."))` is refused, not run. Values must be JSON-compatible.
Arguments are keywords; positional ones are accepted only when the caller names the function's
parameters (`positional=`, e.g. read from the tool's `def` with `def_parameters`). One
`print(...)` around the call is looked through: ASTRA's call statements are written to be
printed. Model replies (`data_synth.env.calls`) and imported datasets (`env_registry.importers`)
share this parser.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

MAX_CALL_CHARS = 20_000
_JSON_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


class CallStatementError(ValueError):
    """The text is not one call of a plain name with literal arguments; the message says why."""


def _literal(node: ast.expr, where: str) -> Any:
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e, where) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise CallStatementError(f"{where}: `**` inside a dict is not a literal")
            key = _literal(k, where)
            if not isinstance(key, str):
                raise CallStatementError(f"{where}: dict keys must be strings (JSON objects), got {key!r}")
            out[key] = _literal(v, where)
        return out
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise CallStatementError(
            f"{where} is not a literal ({ast.unparse(node)[:80]}); write concrete values only"
        ) from None
    if isinstance(value, (set, frozenset, bytes, complex)) or (isinstance(value, float) and value != value):
        raise CallStatementError(f"{where}: {type(value).__name__} values are not JSON; use strings, numbers, lists")
    return value


def _call_node(text: str) -> ast.Call:
    text = text.strip().strip("`").strip()
    if text.startswith("python\n"):
        text = text[len("python\n") :]
    text = text.rstrip(";").strip()
    if not text:
        raise CallStatementError("the call statement is empty")
    if len(text) > MAX_CALL_CHARS:
        raise CallStatementError(f"the call statement is {len(text)} characters (limit {MAX_CALL_CHARS})")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, MemoryError, RecursionError, ValueError) as e:
        raise CallStatementError(f"the call statement does not parse: {getattr(e, 'msg', e)}") from None
    call = tree.body
    if (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Name)
        and call.func.id == "print"
        and len(call.args) == 1
        and not call.keywords
    ):
        call = call.args[0]
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise CallStatementError("write exactly one call of the form name(arg=value, ...)")
    return call


def parse_call_statement(
    text: str, *, name: str | None = None, positional: Sequence[str] | None = None
) -> tuple[str, dict[str, Any]]:
    """(function name, arguments) of a call statement; raises `CallStatementError`.

    `name`: the function the call must name. `positional`: the function's parameter names in
    order, to bind positional arguments to (without it, positional arguments are refused)."""
    call = _call_node(text)
    fn = call.func.id
    if name is not None and fn != name:
        raise CallStatementError(f"the call names {fn!r}; the tool is {name!r}")
    args: dict[str, Any] = {}
    if call.args:
        if positional is None:
            raise CallStatementError("pass every argument by keyword (name=value), not by position")
        if len(call.args) > len(positional):
            raise CallStatementError(
                f"{len(call.args)} positional arguments, but {fn}() takes {len(positional)} ({list(positional)})"
            )
        for param, node in zip(positional, call.args, strict=False):
            if isinstance(node, ast.Starred):
                raise CallStatementError("`*args` is not allowed; write each argument")
            args[param] = _literal(node, f"argument {param!r}")
    for kw in call.keywords:
        if kw.arg is None:
            raise CallStatementError("`**kwargs` is not allowed; write each argument")
        if kw.arg in args:
            raise CallStatementError(f"argument {kw.arg!r} is given twice")
        args[kw.arg] = _literal(kw.value, f"argument {kw.arg!r}")
    return fn, args


def def_parameters(source: str, name: str) -> list[str] | None:
    """The positional-or-keyword parameter names of the top-level `def name` in `source`
    (read with `ast`, never executed); None when the source does not parse or has no such def."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if not defs:
        return None
    a = defs[-1].args
    return [p.arg for p in a.posonlyargs + a.args]
