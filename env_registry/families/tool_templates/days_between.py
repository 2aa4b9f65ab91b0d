"""Pure tool: days between two dates (the same in every environment)."""

from env_registry.families.tool_templates._dates import _date


def days_between_dates(start_date: str, end_date: str, inclusive: bool = False) -> dict:
    """Days from start_date to end_date (negative when end_date is earlier)."""
    start, end = _date(start_date, "start_date"), _date(end_date, "end_date")
    if not isinstance(inclusive, bool):
        raise ValueError(f"'inclusive' must be true or false; got {inclusive!r}")
    days = (end - start).days
    if inclusive:
        days += 1 if days >= 0 else -1
    return {"start_date": start.isoformat(), "end_date": end.isoformat(), "inclusive": inclusive, "days": days}
