"""A tool's arguments against its JSON Schema: the one validator every check builds.

Calls the model makes (the rollout, trajectory synthesis) and golden calls (environment
validation and synthesis) are checked by the same validator, so a schema means the same thing
everywhere: the draft the schema declares (`$schema`; 2020-12 when it declares none), with
`format` asserted by jsonschema's format checker of that draft (`date`, `email`, `ipv4`, ...;
formats whose checker needs a library that is not installed are not asserted, anywhere).

Both builders are cached on the schema's JSON text: schemas repeat across rollouts, samples and
merged environments, and the meta-schema walk is the expensive part.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema
from jsonschema.protocols import Validator

__all__ = ["argument_validator", "schema_error"]


def argument_validator(parameters: dict[str, Any]) -> Validator:
    """The validator of arguments for `parameters`; raises `jsonschema.SchemaError` when
    `parameters` is not a valid JSON Schema."""
    return _validator(json.dumps(parameters, sort_keys=True))


def schema_error(parameters: dict[str, Any]) -> jsonschema.SchemaError | None:
    """Why `parameters` is not a valid JSON Schema of its draft (meta-schema), or None."""
    return _schema_error(json.dumps(parameters, sort_keys=True))


def _draft(schema: dict[str, Any]) -> type[Validator]:
    return jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)


@lru_cache(maxsize=16384)
def _validator(schema_json: str) -> Validator:
    schema = json.loads(schema_json)
    cls = _draft(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@lru_cache(maxsize=16384)
def _schema_error(schema_json: str) -> jsonschema.SchemaError | None:
    schema = json.loads(schema_json)
    try:
        _draft(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return exc
    return None
