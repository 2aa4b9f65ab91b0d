"""Pure tool: age in completed years (the same in every environment)."""

from env_registry.families.tool_templates._dates import _date


def calculate_age(birth_date: str, on_date: str) -> dict:
    """Completed years between birth_date and on_date."""
    born, on = _date(birth_date, "birth_date"), _date(on_date, "on_date")
    if on < born:
        raise ValueError("'on_date' is before 'birth_date'")
    years = on.year - born.year - ((on.month, on.day) < (born.month, born.day))
    return {"birth_date": born.isoformat(), "on_date": on.isoformat(), "age_years": years}
