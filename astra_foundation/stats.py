"""The mean and its standard error, the one way every table of astra-verl computes and prints them.

    mean_se([])          (nan, nan)   no values: no mean
    mean_se([x])         (x, nan)     one value: a mean, no standard error (printed "no SE")
    mean_se(xs)          (mean, sample standard deviation / sqrt(n)), n >= 2

An SE of 0 for one value would claim a certainty one value cannot give (a difference of two
single runs would read as significant); NaN says "not measured" and every consumer prints it so.
Pure: imports nothing but `math`, so evaluation tables and benchmarks share it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["NO_SE", "format_mean_se", "mean_se"]

NO_SE = "no SE"


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """(mean, standard error of the mean) of `values` (see the module docstring for < 2 values).
    A NaN among them makes both NaN: a caller with missing values drops them first, saying so."""
    n = len(values)
    if n == 0:
        return math.nan, math.nan
    mean = math.fsum(values) / n
    if n < 2:
        return mean, math.nan
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def format_mean_se(cell: tuple[float, float], spec: str = ".3f", *, scale: float = 1.0, sep: str = " ± ") -> str:
    """`mean ± se` with `spec` (values times `scale`); "n/a" without a mean; `mean (no SE)` without an SE."""
    mean, se = cell
    if math.isnan(mean):
        return "n/a"
    shown = format(scale * mean, spec)
    if math.isnan(se):
        return f"{shown} ({NO_SE})"
    return f"{shown}{sep}{format(scale * se, spec.lstrip('+'))}"
