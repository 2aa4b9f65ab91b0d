"""Template: the public events a world's city hosts, in date order."""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Events Guide"
_CITIES: dict = {"springfield": "Springfield"}
_EVENTS: list = [{"event": "Springfield Jazz Week", "city": "Springfield", "start_date": "2025-06-01"}]


def events_in_city(city: str, order: str = "asc", limit: int = 10) -> dict:
    """Events hosted by a city, by start date (earliest first with order 'asc')."""
    name = _CITIES[_find(_CITIES, city, "city", "city", _TITLE)]
    if order not in ("asc", "desc"):
        raise ValueError(f"'order' must be 'asc' or 'desc'; got {order!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 50:
        raise ValueError(f"'limit' must be an integer between 1 and 50; got {limit!r}")
    found = sorted((e for e in _EVENTS if e["city"] == name), key=lambda e: e["start_date"], reverse=order == "desc")
    return {"city": name, "order": order, "events": found[:limit]}
