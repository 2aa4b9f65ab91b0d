"""bench/learning.py's statistics: per seed what was measured (`SeedRun`), the table's mean ± SE
over seeds (`aggregate`), a column's rise over seeds (`rise`) or, with one seed, over environments
paired before and after (`row_rise`). Mean and SE are `astra_foundation.stats.mean_se`'s; a value a
seed did not measure (None or NaN) is left out of its cell.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from learning_logs import COLUMNS

from astra_foundation.stats import mean_se


def measured(values: Sequence[float | None]) -> list[float]:
    """The values a seed measured (None: not logged; NaN: not recorded)."""
    return [v for v in values if v is not None and not math.isnan(v)]


@dataclass
class SeedRun:
    seed: int
    base: dict[str, float]
    steps: dict[int, dict[str, float]]
    seconds: dict[str, float]
    sft_loss: tuple[float, float]
    # "base" or a validated step -> split -> env id -> F1 (greedy), for paired SEs over environments
    rows: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)


def row_rise(run_: SeedRun, split: str, start: str, end: str) -> tuple[float, float, int]:
    """Mean and SE over the split's environments of F1(end) - F1(start), paired by environment."""
    a, b = run_.rows.get(start, {}).get(split, {}), run_.rows.get(end, {}).get(split, {})
    diffs = [b[e] - a[e] for e in a if e in b]
    mean, se = mean_se(diffs)
    return mean, se, len(diffs)


def aggregate(runs: Sequence[SeedRun]) -> dict[str, dict[str, tuple[float, float]]]:
    """{"base" | "step N": {column: (mean, SE over seeds)}} for steps every seed validated."""
    steps = sorted(set.intersection(*(set(r.steps) for r in runs)))
    table = {"base": {c: mean_se(measured([r.base.get(c) for r in runs])) for c in COLUMNS}}
    for s in steps:
        table[f"step {s}"] = {c: mean_se(measured([r.steps[s].get(c) for r in runs])) for c in COLUMNS}
    return table


def rise(runs: Sequence[SeedRun], column: str, start: str, end: str) -> tuple[float, float]:
    """Mean and SE over seeds of column(end) - column(start) ("base" or a step number)."""

    def value(r: SeedRun, at: str) -> float:
        return r.base[column] if at == "base" else r.steps[int(at)][column]

    return mean_se(measured([value(r, end) - value(r, start) for r in runs]))
