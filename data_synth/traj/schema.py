"""Tool schemas made OpenAI-convertible, or rejected with the reason (docs/method.md §1: kept servers have
OpenAI-convertible schemas).

Tool docs in the wild use Python type names (BFCL writes `"type": "dict"`, `"float"`, `"tuple"`,
`"any"`). `normalize_parameters` maps those to JSON Schema, checks the result against the JSON
Schema meta-schema (the `jsonschema` reference implementation) and the shape OpenAI function
calling needs (an `object` with a `properties` mapping, `required` naming only declared
properties). It never guesses beyond the fixed alias table: a schema it cannot map is rejected,
not repaired.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from env_registry.arguments import schema_error

# OpenAI's function-name rule.
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

JSON_TYPES = {"object", "array", "string", "number", "integer", "boolean", "null"}
# Python/BFCL type names and their JSON Schema equivalent. `any` means "no constraint": the
# `type` keyword is dropped.
TYPE_ALIASES = {
    "dict": "object",
    "map": "object",
    "float": "number",
    "double": "number",
    "int": "integer",
    "long": "integer",
    "str": "string",
    "bool": "boolean",
    "list": "array",
    "tuple": "array",
    "any": None,
}
# Keywords whose value is a schema, a list of schemas, or a mapping name -> schema.
_SUB_SCHEMA = ("items", "additionalProperties", "not", "contains", "propertyNames")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")


class SchemaRejected(ValueError):
    """A schema that cannot be made OpenAI-convertible; the message says where and why."""


def _normalize_node(node: Any, path: str) -> Any:
    if isinstance(node, bool):  # `true`/`false` are valid schemas
        return node
    if not isinstance(node, dict):
        raise SchemaRejected(f"{path}: a schema must be an object, got {type(node).__name__}")
    out = dict(node)
    if "type" in out:
        out_type = out["type"]
        types = out_type if isinstance(out_type, list) else [out_type]
        mapped: list[str] = []
        for t in types:
            if not isinstance(t, str):
                raise SchemaRejected(f"{path}.type: expected a type name, got {t!r}")
            name = t.strip().lower()
            if name in JSON_TYPES:
                mapped.append(name)
            elif name in TYPE_ALIASES:
                if TYPE_ALIASES[name] is not None:
                    mapped.append(TYPE_ALIASES[name])
                else:  # `any` anywhere in the union makes the union unconstrained
                    mapped = []
                    break
            else:
                raise SchemaRejected(f"{path}.type: unknown type {t!r} (not JSON Schema nor a known alias)")
        if not mapped:
            del out["type"]
        else:
            out["type"] = mapped[0] if len(mapped) == 1 else mapped
    for key in _SUB_SCHEMA:
        if key in out and isinstance(out[key], dict | bool):
            out[key] = _normalize_node(out[key], f"{path}.{key}")
    if isinstance(out.get("items"), list):  # draft-4 tuple form
        out["prefixItems"] = out.pop("items")
    for key in _SCHEMA_LISTS:
        if key in out:
            if not isinstance(out[key], list):
                raise SchemaRejected(f"{path}.{key}: expected a list of schemas")
            out[key] = [_normalize_node(s, f"{path}.{key}[{i}]") for i, s in enumerate(out[key])]
    for key in _SCHEMA_MAPS:
        if key in out:
            if not isinstance(out[key], dict):
                raise SchemaRejected(f"{path}.{key}: expected a mapping of name -> schema")
            out[key] = {k: _normalize_node(v, f"{path}.{key}.{k}") for k, v in out[key].items()}
    return out


def normalize_parameters(schema: Any) -> dict[str, Any]:
    """The OpenAI-convertible form of a tool's `parameters`, or `SchemaRejected`.

    `None` or `{}` (a tool without arguments) becomes an empty object schema.
    """
    if schema is None or schema == {}:
        return {"type": "object", "properties": {}}
    out = _normalize_node(copy.deepcopy(schema), "parameters")
    if not isinstance(out, dict):
        raise SchemaRejected("parameters: must be an object schema")
    if out.get("type", "object") != "object":
        raise SchemaRejected(f"parameters.type: must be 'object' for function calling, got {out.get('type')!r}")
    out["type"] = "object"
    props = out.setdefault("properties", {})
    if not isinstance(props, dict):
        raise SchemaRejected("parameters.properties: must be a mapping of name -> schema")
    required = out.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise SchemaRejected("parameters.required: must be a list of property names")
    missing = [r for r in required if r not in props]
    if missing:
        raise SchemaRejected(f"parameters.required: names {missing} are not declared in properties")
    if len(set(required)) != len(required):
        raise SchemaRejected("parameters.required: duplicate names")
    e = schema_error(out)
    if e is not None:
        where = ".".join(str(p) for p in e.absolute_path) or "(root)"
        raise SchemaRejected(f"parameters.{where}: not valid JSON Schema: {e.message}")
    return out


def normalize_output(schema: Any) -> dict[str, Any] | None:
    """A documented output schema (BFCL `response`, MCP `outputSchema`), normalized; `None` when
    absent. An output schema that cannot be mapped is dropped by the caller with a warning (it only
    informs edge scoring; it is not part of the function-calling contract)."""
    if schema is None or schema == {}:
        return None
    out = _normalize_node(copy.deepcopy(schema), "output")
    e = schema_error(out)
    if e is not None:
        raise SchemaRejected(f"output: not valid JSON Schema: {e.message}")
    return out


def check_tool_name(name: Any) -> str:
    if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
        raise SchemaRejected(f"name: {name!r} is not a valid function name (letters, digits, _ and -, 1..64)")
    return name
