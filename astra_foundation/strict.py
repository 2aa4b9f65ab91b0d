"""The two bases of what crosses a boundary: `StrictModel` (settings, and records read back from
a run's own payloads) and `RecordModel` (records persisted as JSON and read back lax).

A recipe section (`astra.sandbox`, `astra.rollout`, ...), a sampler's keyword arguments or a
record read back from a parquet row or a Ray payload is a `StrictModel`: frozen, unknown keys
refused, types checked without coercion (YAML's `5` for a float field is fine, `"5"` for an int
is not). Records that are persisted carry a `version` field and check it on read.

A model names where it lives (`section`, e.g. "astra.sandbox"), so every error says what was
wrong, where and what to do, the same way everywhere:

    astra.sandbox: unknown keys ['timeout']; known keys: ['backend', 'call_timeout_s', ...]
    astra.sandbox.memory_mb must be int, got '512'
    astra.batch_filling.delta must be >= 0, got -1

`RecordModel` is the base of the persisted data records that are read back from JSON and edited
in place: the environment spec (`env_registry.spec`: mutable, so an importer or a repair step can
fill a field, and lax, so JSON's strings become enums), the rows' ground-truth targets
(`BfclTarget`, `TauTarget`) and the synthesis pipelines' step records (`data_synth.pipeline.
Record`, the trajectory records). It refuses unknown keys like `StrictModel`, but is neither
frozen nor strict, and its errors stay pydantic's `ValidationError` (their readers report them
with the record's path). Not covered by either base: the episode records of
`astra_verl.calls.call_log` (`StrictModel` subclasses that relax `frozen`/`strict` for JSON),
the environment pipeline's parts (`data_synth.env.records`, their own `extra="forbid"` base),
the LLM client's wire types and importers' views of outside formats (`extra="ignore"`).

This module is the foundation under the sandbox and the LLM client: it imports nothing of ours
but `astra_foundation.errors` (a `SettingsError` is a `UserError`: command lines print it as one line).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from astra_foundation.errors import UserError

_KINDS = {
    "int_type": "int",
    "int_parsing": "int",
    "int_from_float": "int",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "tuple_type": "a list",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
}
_BOUNDS = {
    "greater_than": "> {gt}",
    "greater_than_equal": ">= {ge}",
    "less_than": "< {lt}",
    "less_than_equal": "<= {le}",
}


class SettingsError(UserError, ValueError, TypeError):
    """Settings or a record are malformed. A ValueError and a TypeError, so callers catching either see it."""


class StrictModel(BaseModel):
    """See the module docstring. Subclasses set `section` to the path they are read from."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
    section: ClassVar[str] = ""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise SettingsError(describe(exc, self.section or type(self).__name__, type(self))) from exc

    @classmethod
    def from_mapping(cls, data: Any, section: str | None = None) -> Any:
        """Build from a mapping (a dict or an OmegaConf node; None gives the defaults)."""
        where = section or cls.section or cls.__name__
        if data is None:
            return cls()
        if isinstance(data, BaseModel):
            data = data.model_dump()
        elif not isinstance(data, Mapping) and hasattr(data, "items"):  # an OmegaConf DictConfig
            data = {k: data[k] for k in data}
        if not isinstance(data, Mapping):
            raise SettingsError(f"{where} must be a mapping, got {type(data).__name__}")
        if section is None or section == cls.section:
            return cls(**data)
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            raise SettingsError(describe(exc, where, cls)) from exc


class RecordModel(BaseModel):
    """A persisted record read back from JSON: unknown keys refused; mutable, lax types (see the
    module docstring)."""

    model_config = ConfigDict(extra="forbid")


def describe(exc: ValidationError, where: str, model: type[BaseModel]) -> str:
    """One sentence per problem of `exc`, each naming its field path under `where`."""
    unknown = [".".join(map(str, e["loc"])) for e in exc.errors() if e["type"] == "extra_forbidden"]
    parts = []
    if unknown:
        parts.append(f"{where}: unknown keys {sorted(unknown)}; known keys: {sorted(model.model_fields)}")
    for e in exc.errors():
        if e["type"] == "extra_forbidden":
            continue
        path, reason = ".".join([where, *map(str, e["loc"])]), _reason(e)
        parts.append(f"{path} {reason}" if reason.startswith(("must ", "is ")) else f"{path}: {reason}")
    return "; ".join(parts)


def _reason(error: Mapping[str, Any]) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    got = f", got {error['input']!r}" if "input" in error else ""
    if kind == "missing":
        return "is required"
    if kind in _KINDS:
        return f"must be {_KINDS[kind]}{got}"
    if kind in _BOUNDS:
        return f"must be {_BOUNDS[kind].format(**ctx)}{got}"
    if kind in ("literal_error", "enum"):
        return f"must be one of {ctx.get('expected', '')}{got}"
    if kind in ("value_error", "assertion_error"):
        return f"{ctx.get('error', error['msg'])}"
    return f"is invalid ({error['msg']}){got}"
