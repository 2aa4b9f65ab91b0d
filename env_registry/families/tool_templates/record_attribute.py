"""Template: one attribute of one record of a world's table.

Rendered per tool: the prelude's constants hold the table, `attribute_of` takes the tool's
name, `entity` the name of the table's key parameter (`city`, `name`, ...), and the docstring
the tool's summary.
"""

from env_registry.families.tool_templates._records import _FIELDS, _LABEL, _record


def attribute_of(entity: str, attribute: str) -> dict:
    """Look up one attribute of a record.

    Returns {"<name key>": ..., "attribute": ..., "value": ...}.
    """
    record = _record(entity)
    if not isinstance(attribute, str) or attribute.strip().lower() not in _FIELDS:
        raise ValueError(f"'attribute' must be one of: {', '.join(_FIELDS)}; got {attribute!r}")
    attribute = attribute.strip().lower()
    return {_LABEL: record[_LABEL], "attribute": attribute, "value": record[attribute]}
