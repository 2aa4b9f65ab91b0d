"""`text_reading.agreeing_readings` bisects a text's sorted floats instead of testing every reading (the
reward's hot path: bench/reward.py). The readings it yields must be exactly those the plain test of
every reading yields, in text order, whatever the numbers, tolerances, percentages and roundings."""

from __future__ import annotations

import random
import re

import pytest
import sympy

from env_registry.spec import AnswerRule
from env_registry.text_reading import (
    _DATE_HINT,
    _NUMERIC_DATE,
    NUMBER,
    _float_miss,
    _read_general,
    _scan,
    agreeing_readings,
    literal_value,
    readings,
    within_tolerance,
)


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
        assert list(agreeing_readings(number, text, rule)) == expected, (answer, text, rule)
        found += bool(expected)
    assert 30 < found < 290  # both hits and misses were tested


def reference_readings(text: str) -> list[tuple]:
    """The reader as plainly written before its bulk path: every match read one by one, dates
    looked for in every text."""
    dates = [m.span() for m in _NUMERIC_DATE.finditer(text)]
    found = [m for m in NUMBER.finditer(text) if not any(a <= m.start() < b for a, b in dates)]
    return _read_general(text, found)


PIECES = (
    lambda rng: str(rng.randrange(-(10**6), 10**6)),
    lambda rng: f"{rng.random() * 1e4:.3f}",
    lambda rng: f'{{"id": {rng.randrange(10**6)}, "name": "item-{rng.randrange(999)}"}}',
    lambda rng: f"{rng.randrange(1900, 2100)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}",
    lambda rng: f"{rng.randrange(1, 13)}/{rng.randrange(1, 29)}/{rng.randrange(1900, 2100)}",
    lambda rng: f"{rng.randrange(100)}%",
    lambda rng: f"{rng.randrange(10**7):,}",
    lambda rng: f"[{rng.randrange(99)},{rng.randrange(100, 999)}]",
    lambda rng: "1.2 × 10^6",
    lambda rng: "1" + "0" * 400,
    lambda rng: rng.choice(["a-1", "x/2", "v1.2.3", "3-4", "July 20, 1976", ".5", "-.25e3", "答案是42。"]),
)


@pytest.mark.parametrize("seed", range(4))
def test_the_scan_reads_what_the_plain_reader_reads(seed):
    """`_scan`'s bulk path (no percentage, no separator) and its skipped date search (no digit,
    dash or slash, digit) read every text exactly as the plain one-by-one reader does."""
    rng = random.Random(seed)
    for _ in range(400):
        pieces = rng.sample(PIECES, rng.randrange(1, 4))
        text = rng.choice([" ", ", ", "; "]).join(rng.choice(pieces)(rng) for _ in range(rng.randrange(0, 12)))
        assert tuple(_scan(text).entries()) == tuple(reference_readings(text)), text
        assert bool(_DATE_HINT.search(text)) == bool(re.search(r"\d[-/]\d", text)), text


@pytest.mark.parametrize("rel_tol", [1e-4, 0.01, 0.05])
def test_floats_decide_a_hit_only_where_the_exact_test_agrees(rel_tol):
    """`_float_hit` lets floats accept a reading without the exact test: at the tolerance's very
    edge (a reading exactly `rel_tol` away, a hair inside, a hair outside) the result is the exact
    test's."""
    rule = AnswerRule(rel_tol=rel_tol, abs_tol=0.0)
    for answer in ["1", "42", "0.125", "98765432.1", "-7.25", "3.5e-7"]:
        number = literal_value(answer)[0]
        edge = number * (1 + sympy.Rational(rel_tol))
        for nudge in (0, sympy.Rational(1, 10**15), -sympy.Rational(1, 10**15), sympy.Rational(1, 10**9)):
            stated = sympy.Float(edge * (1 + nudge), 30)
            text = f"value {stated:.25e} here"
            assert list(agreeing_readings(number, text, rule)) == every_reading(number, text, rule), text
