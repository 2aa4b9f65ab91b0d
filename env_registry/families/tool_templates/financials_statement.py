"""Template: a company's income statement for one fiscal year (every metric at once)."""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Markets"
_RESULTS: dict = {"acme labs": {"company": "Acme Labs", "currency": "USD", "results": {2024: {"revenue": 120.5}}}}
_NAMES = {key: row["company"] for key, row in _RESULTS.items()}


def income_statement(company: str, fiscal_year: int) -> dict:
    """Audited income statement of a listed company for one fiscal year, in millions of its
    reporting currency."""
    row = _RESULTS[_find(_NAMES, company, "company", "company", _TITLE)]
    if isinstance(fiscal_year, bool) or not isinstance(fiscal_year, int):
        raise ValueError(f"'fiscal_year' must be an integer year; got {fiscal_year!r}")
    if fiscal_year not in row["results"]:
        raise ValueError(f"No results for fiscal year {fiscal_year}; available: {sorted(row['results'])}")
    figures = {f"{metric}_millions": value for metric, value in row["results"][fiscal_year].items()}
    return {"company": row["company"], "fiscal_year": fiscal_year, "currency": row["currency"], **figures}
