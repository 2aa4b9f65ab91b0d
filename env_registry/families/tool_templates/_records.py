"""Prelude of the record lookups (profile, attribute, batch): one table of a world, a record by
name, and the `fields` argument. The annotated constants are the table, filled per tool."""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Atlas"  # the data provider, as the model reads it
_WHAT: str = "city"  # what one record is, in words
_PARAM: str = "entity"  # the rendered name of the argument naming records, for messages
_LABEL: str = "city"  # the output key holding the record's name
_RECORDS: dict = {"springfield": {"city": "Springfield", "population": 30720}}
_FIELDS: tuple = ("population",)
_NAMES = {key: record[_LABEL] for key, record in _RECORDS.items()}


def _record(wanted: object) -> dict:
    return _RECORDS[_find(_NAMES, wanted, _PARAM, _WHAT, _TITLE)]


def _fields(fields: object) -> list:
    """The fields asked for (all when None), or a ValueError listing the known ones."""
    if fields is None:
        return list(_FIELDS)
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) for f in fields):
        raise ValueError("'fields' must be a non-empty list of field names: " + ", ".join(_FIELDS))
    unknown = [f for f in fields if f not in _FIELDS]
    if unknown:
        raise ValueError(f"Unknown field(s) {unknown}; available fields: {', '.join(_FIELDS)}")
    return fields
