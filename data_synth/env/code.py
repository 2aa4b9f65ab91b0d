"""Checks of model-written tool code and schemas that need no execution.

`code_problems` runs the environment validator's own tool rules (`env_registry.validate.check_tool`:
syntax, a top-level `def <name>`, a signature that fits the schema, golden-call arguments
that fit the schema) on the same parse tree, so a tool that passes here passes there; and
it refuses imports outside a small standard-library allowlist (ASTRA: builtins only) and
the obvious escape hatches. This is feedback for the model, not security: the code only ever
runs in the sandbox, which enforces isolation whatever the code does.
"""

from __future__ import annotations

import ast
import keyword
from typing import Any

from astra_foundation.llm.extract import ReplyError
from env_registry.arguments import schema_error
from env_registry.spec import GoldenCall, ToolSpec
from env_registry.structure import check_tool

ALLOWED_IMPORTS = frozenset(
    {
        "math",
        "json",
        "re",
        "datetime",
        "statistics",
        "collections",
        "itertools",
        "functools",
        "decimal",
        "fractions",
        "string",
        "calendar",
        "bisect",
        "heapq",
        "operator",
        "copy",
        "typing",
        "dataclasses",
        "enum",
    }
)
FORBIDDEN_NAMES = frozenset({"open", "eval", "exec", "compile", "__import__", "input", "breakpoint", "globals"})
MAX_TOOL_NAME = 64


def check_schema(value: Any) -> dict[str, Any]:
    """A tool document `{name, description, parameters}`, normalised; raises ReplyError."""
    if not isinstance(value, dict):
        raise ReplyError("bad_schema", "expected an object with name, description and parameters")
    if "function" in value and isinstance(value["function"], dict):  # the {"type": "function", ...} wrapper
        value = value["function"]
    name, description, params = value.get("name"), value.get("description"), value.get("parameters")
    if not isinstance(name, str) or not name.isascii() or not name.isidentifier() or keyword.iskeyword(name):
        raise ReplyError("bad_schema", f"`name` must be a snake_case ASCII identifier, got {name!r}")
    if len(name) > MAX_TOOL_NAME:
        raise ReplyError("bad_schema", f"`name` is longer than {MAX_TOOL_NAME} characters")
    if not isinstance(description, str) or not description.strip():
        raise ReplyError("bad_schema", "`description` must be a non-empty string")
    if not isinstance(params, dict) or params.get("type") != "object":
        raise ReplyError("bad_schema", '`parameters` must be a JSON Schema object ({"type": "object", ...})')
    props = params.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(p, dict) for p in props.values()):
        raise ReplyError("bad_schema", "`parameters.properties` must map names to schemas")
    bad = [p for p in props if not (p.isascii() and p.isidentifier()) or keyword.iskeyword(p)]
    if bad:
        raise ReplyError("bad_schema", f"parameter names must be Python identifiers: {bad}")
    required = params.get("required", [])
    if not isinstance(required, list) or not set(required) <= set(props):
        raise ReplyError("bad_schema", f"`required` must list declared properties (declared: {sorted(props)})")
    error = schema_error(params)
    if error:
        raise ReplyError("bad_schema", f"`parameters` is not a valid JSON Schema: {error.message}")
    return {"name": name, "description": description.strip(), "parameters": params}


def check_scaled(value: Any, base: dict[str, Any]) -> dict[str, Any]:
    """A scaled schema must stay backward compatible with `base` (same name, every old
    parameter with its type, no new required parameter)."""
    new = check_schema(value)
    if new["name"] != base["name"]:
        raise ReplyError("not_compatible", f"keep the name {base['name']!r} (got {new['name']!r})")
    old_props, new_props = base["parameters"].get("properties", {}), new["parameters"].get("properties", {})
    for p, spec in old_props.items():
        if p not in new_props:
            raise ReplyError("not_compatible", f"parameter {p!r} was removed; keep every existing parameter")
        if spec.get("type") != new_props[p].get("type"):
            raise ReplyError(
                "not_compatible", f"parameter {p!r} changed type {spec.get('type')!r} -> {new_props[p].get('type')!r}"
            )
    added_required = set(new["parameters"].get("required", [])) - set(base["parameters"].get("required", []))
    if added_required:
        raise ReplyError("not_compatible", f"new parameters {sorted(added_required)} must be optional")
    return new


def _import_problems(tree: ast.AST) -> list[str]:
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            roots = [(node.module or "").split(".")[0]] if node.level == 0 else ["(relative import)"]
        else:
            if isinstance(node, ast.Name) and node.id in FORBIDDEN_NAMES:
                problems.append(f"uses {node.id}(); tools may not read files, evaluate code or import dynamically")
            continue
        problems += [
            f"imports {r!r}; allowed: {', '.join(sorted(ALLOWED_IMPORTS))}" for r in roots if r not in ALLOWED_IMPORTS
        ]
    return sorted(set(problems))


def code_problems(source: str, tool: dict[str, Any], calls: list[tuple[dict[str, Any], str]]) -> list[str]:
    """What is wrong with `source` as the implementation of `tool` for `calls` ([(args, answer)])."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [f"syntax error: {e.msg} (line {e.lineno})"]
    except (ValueError, MemoryError, RecursionError) as e:
        return [f"the code does not parse: {e}"]
    tool_spec = ToolSpec(
        name=tool["name"],
        description=tool["description"],
        parameters=tool["parameters"],
        source=source,
        golden_calls=[GoldenCall(args=a, expected=ans) for a, ans in calls],
    )
    return _import_problems(tree) + [i.message for i in check_tool(tool_spec, tree=tree)]
