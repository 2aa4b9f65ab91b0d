"""Template: the cities of a world's country, sorted and cut."""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Atlas"
_CITIES: list = [{"city": "Springfield", "country": "Freedonia", "population": 30720, "founded_year": 1796}]
_COUNTRIES: dict = {"freedonia": "Freedonia"}
_SORT_KEYS = ("population", "founded_year", "city")


def list_cities(country: str, sort_by: str = "population", order: str = "desc", limit: int = 10) -> dict:
    """List the cities of a country, sorted by population, founding year or name."""
    name = _COUNTRIES[_find(_COUNTRIES, country, "country", "country", _TITLE)]
    if sort_by not in _SORT_KEYS:
        raise ValueError(f"'sort_by' must be one of {', '.join(_SORT_KEYS)}; got {sort_by!r}")
    if order not in ("asc", "desc"):
        raise ValueError(f"'order' must be 'asc' or 'desc'; got {order!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 50:
        raise ValueError(f"'limit' must be an integer between 1 and 50; got {limit!r}")
    found = [c for c in _CITIES if c["country"] == name]
    found.sort(key=lambda c: c[sort_by], reverse=(order == "desc"))
    return {"country": name, "sort_by": sort_by, "order": order, "cities": found[:limit]}
