"""Template: a profile lookup over one table of a world (all fields, or the ones asked for).

Rendered per tool: the prelude's constants hold the table, `profile` takes the tool's name,
`entity` the name of the table's key parameter (`city`, `ticker`, ...), and the docstring the
tool's summary.
"""

from env_registry.families.tool_templates._records import _LABEL, _fields, _record


def profile(entity: str, fields: list | None = None) -> dict:
    """Look up a record by name.

    Returns a dict with the record's name and the requested fields (all fields when `fields` is
    omitted).
    """
    record = _record(entity)
    return {_LABEL: record[_LABEL], **{f: record[f] for f in _fields(fields)}}
