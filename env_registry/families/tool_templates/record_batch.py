"""Template: a batch lookup of several records of one table of a world.

Rendered per tool: the constants hold the table, `lookup_many` takes the tool's name, `entities`
the name of the list parameter (`cities`, `tickers`, ...), and the docstring the tool's summary.
"""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Atlas"  # the data provider, as the model reads it
_WHAT: str = "city"  # what one record is, in words
_PARAM: str = "entities"  # the list parameter's rendered name, for messages
_LABEL: str = "city"  # the output key holding the record's name
_RECORDS: dict = {"springfield": {"city": "Springfield", "population": 30720}}
_FIELDS: tuple = ("population",)
_NAMES = {key: record[_LABEL] for key, record in _RECORDS.items()}
_MAX_BATCH = 10


def lookup_many(entities: list, fields: list | None = None) -> dict:
    """Look up several records by name.

    Returns {"results": [...]}: per record its name and the requested fields (all fields when
    `fields` is omitted), in the order asked.
    """
    if not isinstance(entities, list) or not entities or len(entities) > _MAX_BATCH:
        raise ValueError(f"'{_PARAM}' must be a list of 1 to {_MAX_BATCH} names")
    records = [_RECORDS[_find(_NAMES, name, _PARAM, _WHAT, _TITLE)] for name in entities]
    if fields is None:
        fields = list(_FIELDS)
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) for f in fields):
        raise ValueError("'fields' must be a non-empty list of field names: " + ", ".join(_FIELDS))
    unknown = [f for f in fields if f not in _FIELDS]
    if unknown:
        raise ValueError(f"Unknown field(s) {unknown}; available fields: {', '.join(_FIELDS)}")
    return {"results": [{_LABEL: record[_LABEL], **{f: record[f] for f in fields}} for record in records]}
