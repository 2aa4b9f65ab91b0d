"""Pure tool: a summary statistic of a list of numbers (the same in every environment)."""


def _median(values: list) -> float:
    ordered, mid = sorted(values), len(values) // 2
    return ordered[mid] if len(values) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


STATISTICS = {
    "sum": sum,
    "mean": lambda values: round(sum(values) / len(values), 2),
    "median": lambda values: round(_median(values), 2),
    "min": min,
    "max": max,
    "range": lambda values: max(values) - min(values),
}


def compute_statistics(values: list, statistic: str) -> dict:
    """sum / mean / median / min / max / range of a non-empty list of numbers."""
    if not isinstance(values, list) or not values:
        raise ValueError("'values' must be a non-empty list of numbers")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        raise ValueError(f"every entry of 'values' must be a number; got {values!r}")
    if not isinstance(statistic, str) or statistic not in STATISTICS:
        raise ValueError(f"'statistic' must be one of {', '.join(STATISTICS)}; got {statistic!r}")
    return {"statistic": statistic, "count": len(values), "result": STATISTICS[statistic](values)}
