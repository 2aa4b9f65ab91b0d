"""Prelude of the procedural date tools: an ISO date argument, or a ValueError naming it."""

import datetime


def _date(value: object, role: str) -> datetime.date:
    if not isinstance(value, str):
        raise ValueError(f"'{role}' must be a date string YYYY-MM-DD; got {value!r}")
    try:
        return datetime.date.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"'{role}' must be a date string YYYY-MM-DD; got {value!r}") from None
