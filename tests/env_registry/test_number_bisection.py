"""`text_reading._agreeing` bisects a text's sorted floats instead of testing every reading (the
reward's hot path: bench/reward.py). The readings it yields must be exactly those the plain test of
every reading yields, in text order, whatever the numbers, tolerances, percentages and roundings."""

from __future__ import annotations

import random

import pytest
import sympy

from env_registry.spec import AnswerRule
from env_registry.text_reading import _agreeing, _float_miss, literal_value, readings, within_tolerance


def every_reading(number: sympy.Rational, text: str, rule: AnswerRule) -> list:
    a = float(number)
    tol = max(rule.abs_tol, rule.rel_tol * abs(a))
    return [
        r for r in readings(text) if not _float_miss(a, tol, r) and within_tolerance(number, r.value, rule, r.half_unit)
    ]


# how a text may state a number near the answer: the forms the reader handles differently
FORMS = (
    lambda rng, x: f"{x:.{rng.randrange(0, 5)}f}",  # a rounding: its half unit widens the tolerance
    lambda rng, x: f"{x:.3e}",
    lambda rng, x: f"{x * 100:.{rng.randrange(0, 3)}f}%",  # read as stated and as a fraction
    lambda rng, x: f"{int(x):,}",  # thousands separators
    lambda rng, x: f"[{rng.randrange(1, 99)},{rng.randrange(100, 999)}]",  # list commas, read both ways
    lambda rng, x: f"-{x:.2f}",
    lambda rng, x: "1" + "0" * 400,  # a float cannot hold it
)


def literal(rng: random.Random, near: float) -> str:
    x = near * (1 + rng.choice([0, 1e-5, -1e-5, 0.004, -0.004, 0.0101, -0.0099, 0.02, 3])) if near else rng.random()
    return rng.choice(FORMS)(rng, x)


@pytest.mark.parametrize("seed", range(6))
def test_bisection_yields_what_testing_every_reading_yields(seed):
    rng = random.Random(seed)
    found = 0
    for _ in range(300):
        answer = rng.choice(["0", "42", "0.125", "1234.5", "-7.25", "3.5e-7", "98765432.1", "12.5%", "1" + "0" * 400])
        number = literal_value(answer.rstrip("%"))[0] / (100 if answer.endswith("%") else 1)
        near = float(number)
        near = near if abs(near) < 1e300 else 1.0
        text = " ".join(literal(rng, near) for _ in range(rng.randrange(0, 30)))
        rule = AnswerRule(rel_tol=rng.choice([0.0, 1e-4, 0.01, 0.05]), abs_tol=rng.choice([0.0, 1e-6, 0.5]))
        expected = every_reading(number, text, rule)
        assert list(_agreeing(number, text, rule)) == expected, (answer, text, rule)
        found += bool(expected)
    assert 30 < found < 290  # both hits and misses were tested
