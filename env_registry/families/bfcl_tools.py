"""BFCL multi-turn tools as `ToolSpec`s: JSON Schemas from BFCL's function docs, wrapper sources
that run BFCL's own API classes inside the sandbox.

Schemas. BFCL's docs use its own type names ("dict", "float", "tuple", ...). They are mapped
to JSON Schema with BFCL's table (`bfcl_eval.constants.type_mappings.GORILLA_TO_OPENAPI`) the
way BFCL converts them for OpenAI-style function calling: a float property gets
`"format": "float"` and the sentence " This is a float type value." in its description, an
unknown type becomes "string". The doc's `response` schema has no slot in an OpenAI function
schema, so it is appended to the description, as BFCL does for APIs without one.

Wrappers. A tool's source is one self-contained sandbox module with one function named after
the API method. It imports the method's class from the installed `bfcl_eval` package (the
sandbox exposes it read-only: `astra.sandbox.packages: [bfcl_eval, mpmath]`), builds the
instance on first use exactly as BFCL's executor does (`class_()`, then
`_load_scenario(deepcopy(initial_config[class]), long_context=...)` unless the class is
stateless), and renders results and errors as BFCL does (a str as is, a dict as JSON, anything
else `str()`, an exception as "Error during execution: <message>"). All tool modules of an
episode share the instances through one registry module in the session's `sys.modules`; a
sandbox session is one episode, so rollouts of the same entry never share state. BFCL's own
executor keeps instances in its module globals, keyed by model name and entry id: it is never
used by the rollout.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from env_registry.families.bfcl_package import bfcl_module

REGISTRY_MODULE = "_astra_bfcl_session"  # the per-session registry the wrappers share
FLOAT_NOTE = " This is a float type value."


class BfclToolError(ValueError):
    """A BFCL function doc cannot be converted."""


def _type_map() -> dict[str, str]:
    return bfcl_module("bfcl_eval.constants.type_mappings").GORILLA_TO_OPENAPI


def _cast_properties(properties: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, prop in properties.items():
        prop = dict(prop)
        bfcl_type = prop.get("type")
        if bfcl_type == "float":
            prop["format"] = "float"
            prop["description"] = prop.get("description", "") + FLOAT_NOTE
        prop["type"] = mapping.get(bfcl_type, "string") if bfcl_type is not None else "string"
        if prop["type"] in ("array", "object"):
            if "properties" in prop:
                prop["properties"] = _cast_properties(prop["properties"], mapping)
            elif "items" in prop:
                items = dict(prop["items"])
                items["type"] = mapping.get(items.get("type"), "string")
                if items["type"] == "array" and "items" in items:
                    items["items"] = {**items["items"], "type": mapping.get(items["items"].get("type"), "string")}
                elif items["type"] == "object" and "properties" in items:
                    items["properties"] = _cast_properties(items["properties"], mapping)
                prop["items"] = items
        out[name] = prop
    return out


def parameters_schema(doc: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a BFCL function doc's arguments."""
    params = doc.get("parameters")
    if not isinstance(params, dict) or not isinstance(params.get("properties"), dict):
        raise BfclToolError(f"BFCL function {doc.get('name')!r}: parameters.properties is missing")
    schema = copy.deepcopy(params)
    schema["type"] = "object"
    schema["properties"] = _cast_properties(schema["properties"], _type_map())
    return schema


def description(doc: dict[str, Any]) -> str:
    text = doc.get("description") or ""
    if "response" in doc:
        text += f" The response field has the following schema: {json.dumps(doc['response'])}"
    return text


_WRAPPER = '''"""BFCL v4 {entry_id}: `{method}` of {class_name} ({module}).

Runs BFCL's own API class in this sandbox session; see env_registry/families/bfcl_tools.py.
"""

import copy
import importlib
import json
import sys
import types

_ENTRY = {entry_id!r}
_CLASS = {class_name!r}
_MODULE = {module!r}
_STATELESS = {stateless!r}
_LONG_CONTEXT = {long_context!r}
_CONFIG = json.loads({config!r})


def _instance():
    registry = sys.modules.get({registry!r})
    if registry is None:
        registry = sys.modules[{registry!r}] = types.ModuleType({registry!r})
        registry.instances = {{}}
    key = (_ENTRY, _CLASS)
    if key not in registry.instances:
        instance = getattr(importlib.import_module(_MODULE), _CLASS)()
        if not _STATELESS:
            instance._load_scenario(copy.deepcopy(_CONFIG), long_context=_LONG_CONTEXT)
        registry.instances[key] = instance
    return registry.instances[key]


def {method}(**kwargs):
    instance = _instance()
    try:
        result = instance.{method}(**kwargs)
    except Exception as exc:
        return f"Error during execution: {{exc}}"
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except Exception:
            return str(result)
    return str(result)
'''


def wrapper_source(
    *, entry_id: str, class_name: str, module: str, method: str, config: dict[str, Any], long_context: bool
) -> str:
    """The sandbox module of one tool (see the module docstring)."""
    if not method.isidentifier():
        raise BfclToolError(f"BFCL function name {method!r} is not a Python identifier")
    stateless = bfcl_module("bfcl_eval.constants.executable_backend_config").STATELESS_CLASSES

    return _WRAPPER.format(
        entry_id=entry_id,
        class_name=class_name,
        module=module,
        method=method,
        stateless=class_name in stateless,
        long_context=long_context,
        config=json.dumps(config, ensure_ascii=False),  # key order is state (e.g. `ls` lists in it)
        registry=REGISTRY_MODULE,
    )
