"""Template: audited annual results of a world's companies."""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Markets"
_RESULTS: dict = {"acme labs": {"company": "Acme Labs", "currency": "USD", "results": {2024: {"revenue": 120.5}}}}
_METRICS: tuple = ("revenue",)
_NAMES = {key: row["company"] for key, row in _RESULTS.items()}


def annual_results(company: str, fiscal_year: int, metric: str = "revenue") -> dict:
    """Audited annual results of a listed company, in millions of its reporting currency."""
    row = _RESULTS[_find(_NAMES, company, "company", "company", _TITLE)]
    if isinstance(fiscal_year, bool) or not isinstance(fiscal_year, int):
        raise ValueError(f"'fiscal_year' must be an integer year; got {fiscal_year!r}")
    if fiscal_year not in row["results"]:
        raise ValueError(f"No results for fiscal year {fiscal_year}; available: {sorted(row['results'])}")
    if metric not in _METRICS:
        raise ValueError(f"'metric' must be one of {', '.join(_METRICS)}; got {metric!r}")
    return {
        "company": row["company"],
        "fiscal_year": fiscal_year,
        "metric": metric,
        "value_millions": row["results"][fiscal_year][metric],
        "currency": row["currency"],
    }
