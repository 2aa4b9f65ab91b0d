"""Template: a batch lookup of several records of one table of a world.

Rendered per tool: the prelude's constants hold the table, `lookup_many` takes the tool's name,
`entities` the name of the list parameter (`cities`, `tickers`, ...), and the docstring the
tool's summary.
"""

from env_registry.families.tool_templates._records import _LABEL, _PARAM, _fields, _record

_MAX_BATCH = 10


def lookup_many(entities: list, fields: list | None = None) -> dict:
    """Look up several records by name.

    Returns {"results": [...]}: per record its name and the requested fields (all fields when
    `fields` is omitted), in the order asked.
    """
    if not isinstance(entities, list) or not entities or len(entities) > _MAX_BATCH:
        raise ValueError(f"'{_PARAM}' must be a list of 1 to {_MAX_BATCH} names")
    records = [_record(wanted) for wanted in entities]
    asked = _fields(fields)
    return {"results": [{_LABEL: record[_LABEL], **{f: record[f] for f in asked}} for record in records]}
