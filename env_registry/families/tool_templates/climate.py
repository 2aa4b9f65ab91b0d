"""Template: monthly climate normals of a world's cities."""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Climate Service"
_NORMALS: dict = {"springfield": {"city": "Springfield", "avg_temp_c": {"july": 21.5}, "avg_precip_mm": {"july": 80}}}
_MONTHS: tuple = ("july",)
_NAMES = {key: row["city"] for key, row in _NORMALS.items()}


def climate_normals(city: str, month: str) -> dict:
    """Long-term climate normals of a city for one month: mean air temperature (°C) and mean
    precipitation (mm)."""
    row = _NORMALS[_find(_NAMES, city, "city", "city", _TITLE)]
    if not isinstance(month, str) or month.strip().lower() not in _MONTHS:
        raise ValueError(f"'month' must be an English month name such as 'july'; got {month!r}")
    m = month.strip().lower()
    return {
        "city": row["city"],
        "month": m,
        "avg_temp_c": row["avg_temp_c"][m],
        "avg_precip_mm": row["avg_precip_mm"][m],
    }
