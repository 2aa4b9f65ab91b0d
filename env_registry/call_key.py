"""Which arguments identify what a call asks, for a tool that does not declare it.

The procedural family knows its tools and declares each `CallKey` itself. A synthesized tool
(an LLM wrote its schema, its code and its golden call) is read instead:

- identifying: every parameter a golden call passes that the schema requires (the entity, the
  key), or that it restricts to an enum or a boolean (a modifier that changes the result:
  units, sort order, a metric);
- not identifying: optional free parameters (a page size, a list of fields to return, a
  language for messages): the caller's choice, as long as the output holds the answer;
- defaults: the literal defaults of the tool function's signature, else the schema's
  `default`, so a call that leaves a modifier at its default agrees with a golden call that
  spells it out.

None when no golden call passes an identifying parameter (nothing to check a call against).
"""

from __future__ import annotations

import ast
from typing import Any

from env_registry.spec import CallKey, ToolSpec

__all__ = ["derive_call_key", "tool_defaults"]


def _signature_defaults(tool: ToolSpec) -> dict[str, Any]:
    try:
        tree = ast.parse(tool.source)
    except (SyntaxError, ValueError):
        return {}
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == tool.name), None)
    if fn is None:
        return {}
    out: dict[str, Any] = {}
    positional = [*fn.args.posonlyargs, *fn.args.args]
    pairs = list(zip(positional[len(positional) - len(fn.args.defaults) :], fn.args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults, strict=True) if d is not None]
    for arg, node in pairs:
        try:
            out[arg.arg] = ast.literal_eval(node)
        except ValueError:
            continue  # not a literal: unknown default
    return out


def tool_defaults(tool: ToolSpec) -> dict[str, Any]:
    """Each parameter's default: the literal default of the function's signature, else the schema's."""
    props = tool.parameters.get("properties") or {}
    out = {p: prop["default"] for p, prop in props.items() if isinstance(prop, dict) and "default" in prop}
    return out | {p: v for p, v in _signature_defaults(tool).items() if p in props}


def derive_call_key(tool: ToolSpec) -> CallKey | None:
    """The identifying parameters of `tool` (see the module docstring)."""
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    passed = {p for g in tool.golden_calls for p in g.args}

    def identifying(p: str) -> bool:
        prop = props.get(p) or {}
        return p in required or "enum" in prop or prop.get("type") == "boolean"

    params = [p for p in props if p in passed and identifying(p)]
    if not params:
        return None
    signature = _signature_defaults(tool)
    defaults = {}
    for p in params:
        if p in signature:
            defaults[p] = signature[p]
        elif "default" in (props.get(p) or {}):
            defaults[p] = props[p]["default"]
    return CallKey(params=params, defaults=defaults)
