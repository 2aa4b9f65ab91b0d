"""Template: a profile lookup over one table of a world (all fields, or the ones asked for).

Rendered per tool: the constants hold the table, `profile` takes the tool's name, `entity` the
name of the table's key parameter (`city`, `ticker`, ...), and the docstring the tool's summary.
"""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Atlas"  # the data provider, as the model reads it
_WHAT: str = "city"  # what one record is, in words
_PARAM: str = "entity"  # the key parameter's rendered name, for messages
_LABEL: str = "city"  # the output key holding the record's name
_RECORDS: dict = {"springfield": {"city": "Springfield", "population": 30720}}
_FIELDS: tuple = ("population",)
_NAMES = {key: record[_LABEL] for key, record in _RECORDS.items()}


def profile(entity: str, fields: list | None = None) -> dict:
    """Look up a record by name.

    Returns a dict with the record's name and the requested fields (all fields when `fields` is
    omitted).
    """
    record = _RECORDS[_find(_NAMES, entity, _PARAM, _WHAT, _TITLE)]
    if fields is None:
        fields = list(_FIELDS)
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) for f in fields):
        raise ValueError("'fields' must be a non-empty list of field names: " + ", ".join(_FIELDS))
    unknown = [f for f in fields if f not in _FIELDS]
    if unknown:
        raise ValueError(f"Unknown field(s) {unknown}; available fields: {', '.join(_FIELDS)}")
    result = {_LABEL: record[_LABEL]}
    for f in fields:
        result[f] = record[f]
    return result
