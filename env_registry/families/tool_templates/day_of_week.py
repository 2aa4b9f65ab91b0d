"""Pure tool: weekday of a date (the same in every environment)."""

from env_registry.families.tool_templates._dates import _date

_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def get_day_of_week(date: str) -> dict:
    """Weekday name of an ISO date."""
    d = _date(date, "date")
    return {"date": d.isoformat(), "day_of_week": _DAYS[d.weekday()]}
