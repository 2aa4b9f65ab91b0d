"""Template: a city's climate normals for the whole year."""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Climate Service"
_NORMALS: dict = {"springfield": {"city": "Springfield", "avg_temp_c": {"july": 21.5}, "avg_precip_mm": {"july": 80}}}
_NAMES = {key: row["city"] for key, row in _NORMALS.items()}


def climate_year(city: str) -> dict:
    """Long-term monthly climate normals of a city: mean air temperature (°C) and mean
    precipitation (mm) for every month."""
    return dict(_NORMALS[_find(_NAMES, city, "city", "city", _TITLE)])
