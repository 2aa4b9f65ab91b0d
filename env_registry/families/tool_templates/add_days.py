"""Pure tool: date arithmetic (the same in every environment)."""

import datetime

from env_registry.families.tool_templates._dates import _date


def add_days(date: str, days: int) -> dict:
    """The date `days` days after `date` (before it when negative)."""
    start = _date(date, "date")
    if isinstance(days, bool) or not isinstance(days, int):
        raise ValueError(f"'days' must be an integer; got {days!r}")
    return {"date": start.isoformat(), "days": days, "result": (start + datetime.timedelta(days=days)).isoformat()}
