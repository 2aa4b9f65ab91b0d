"""Template: road distances between a world's cities."""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Atlas"
_CITIES: dict = {"springfield": "Springfield", "shelbyville": "Shelbyville"}
_ROAD_KM: dict = {"shelbyville|springfield": 42}
_KM_PER_MILE = 1.609344


def road_distance(origin: str, destination: str, unit: str = "km") -> dict:
    """Shortest road distance between two cities, in kilometres or miles."""
    a = _find(_CITIES, origin, "origin", "city", _TITLE)
    b = _find(_CITIES, destination, "destination", "city", _TITLE)
    if unit not in ("km", "mi"):
        raise ValueError(f"'unit' must be 'km' or 'mi'; got {unit!r}")
    if a == b:
        raise ValueError("origin and destination are the same city")
    km = _ROAD_KM["|".join(sorted((a, b)))]
    distance = km if unit == "km" else round(km / _KM_PER_MILE, 1)
    return {"origin": _CITIES[a], "destination": _CITIES[b], "distance": distance, "unit": unit}
