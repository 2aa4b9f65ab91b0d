"""One mean and standard error for every table (#46 §3: four copies gave three answers below two
values: 0, NaN, or a mean of 0 for no values)."""

from __future__ import annotations

import math

import pytest

from astra_foundation.stats import format_mean_se, mean_se


def test_no_values_have_no_mean_and_one_value_has_no_standard_error():
    mean, se = mean_se([])
    assert math.isnan(mean) and math.isnan(se)
    mean, se = mean_se([0.25])
    assert mean == 0.25 and math.isnan(se)
    assert mean_se([1.0, 0.0]) == (0.5, 0.5)
    assert mean_se([1.0, 2.0, 3.0]) == (2.0, pytest.approx(1 / math.sqrt(3)))


def test_printed_no_se_and_n_a():
    assert format_mean_se(mean_se([])) == "n/a"
    assert format_mean_se(mean_se([0.25])) == "0.250 (no SE)"
    assert format_mean_se(mean_se([1.0, 0.0])) == "0.500 ± 0.500"
    assert format_mean_se((0.012, 0.003), "+.1f", scale=100) == "+1.2 ± 0.3"


def test_every_table_uses_the_one_function():
    """envs_report, demo_report, bench/learning.py, bench/transfer_table.py and bench/demo_rise.py
    (bench/reward_hacking.py keeps its own copy until its owner moves it: it answers 0 for one value)."""
    import importlib
    import sys
    from pathlib import Path

    from astra_foundation import stats
    from astra_verl import demo_report
    from astra_verl.eval import envs_report

    assert envs_report.mean_se is stats.mean_se and demo_report.mean_se is stats.mean_se
    bench = str(Path(__file__).resolve().parents[1] / "bench")
    sys.path.insert(0, bench)  # the bench's modules import their siblings; only for these imports
    try:
        for name in ("transfer_table", "learning_stats", "demo_rise"):
            assert importlib.import_module(name).mean_se is stats.mean_se, name
    finally:
        sys.path.remove(bench)


def test_the_demo_rise_of_one_environment_has_no_se_and_is_noise():
    from astra_verl.demo_report import paired_rise, rise_line

    r = paired_rise({"e": 0.0}, {"e": 1.0})
    assert r.rise == 1.0 and math.isnan(r.se) and r.inside_noise
    assert rise_line(r).startswith("rise +1.000 (no SE) (paired SE over 1 environments")
