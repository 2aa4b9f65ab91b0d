"""Prelude of the procedural tools that look a name up: case- and spacing-insensitive, with
"did you mean" hints a model can act on. Rendered into the source of every tool that imports it
(a tool runs in the sandbox as one self-contained module)."""

import difflib


def _find(known: dict, value: object, role: str, what: str, where: str) -> str:
    """The key of `value` in `known` (casefolded name -> display name), or a ValueError."""
    if not isinstance(value, str) or not value.strip():
        example = next(iter(known.values()))
        raise ValueError(f"'{role}' must be a non-empty string, for example {example!r}")
    key = " ".join(value.split()).casefold()
    if key in known:
        return key
    close = difflib.get_close_matches(key, list(known), n=3, cutoff=0.6)
    hint = (" Did you mean: " + ", ".join(known[k] for k in close) + "?") if close else ""
    raise ValueError(f"No {what} named {value!r} in the {where}.{hint}")
