"""Template: one attribute of one record of a world's table.

Rendered per tool: the constants hold the table, `attribute_of` takes the tool's name, `entity`
the name of the table's key parameter (`city`, `name`, ...), and the docstring the tool's summary.
"""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Atlas"  # the data provider, as the model reads it
_WHAT: str = "city"  # what one record is, in words
_PARAM: str = "entity"  # the key parameter's rendered name, for messages
_LABEL: str = "city"  # the output key holding the record's name
_RECORDS: dict = {"springfield": {"city": "Springfield", "population": 30720}}
_FIELDS: tuple = ("population",)
_NAMES = {key: record[_LABEL] for key, record in _RECORDS.items()}


def attribute_of(entity: str, attribute: str) -> dict:
    """Look up one attribute of a record.

    Returns {"<name key>": ..., "attribute": ..., "value": ...}.
    """
    record = _RECORDS[_find(_NAMES, entity, _PARAM, _WHAT, _TITLE)]
    if not isinstance(attribute, str) or attribute.strip().lower() not in _FIELDS:
        raise ValueError(f"'attribute' must be one of: {', '.join(_FIELDS)}; got {attribute!r}")
    attribute = attribute.strip().lower()
    return {_LABEL: record[_LABEL], "attribute": attribute, "value": record[attribute]}
