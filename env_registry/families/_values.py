"""Answer values of the procedural family and the exact arithmetic that derives them.

Answers come from the world model, not from running tool code: integers and dates exactly,
decimals with sympy rationals rounded half-up, with rounding ties refused (a float-based tool
could round a tie either way).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import sympy

from env_registry.spec import AnswerRule

Value = int | Decimal | dt.date | str


class Retry(Exception):
    """This draw cannot make the requested task (dead-end walk, tie, equal values): draw again."""


def exact(v: int | Decimal | str) -> sympy.Rational:
    return sympy.Rational(str(v))


def round_half_up(x: sympy.Rational, places: int) -> Decimal:
    """Round half-up; refuse values too close to a tie, where a float tool may round either way."""
    scaled = x * 10**places
    frac = scaled - sympy.floor(scaled)
    if abs(frac - sympy.Rational(1, 2)) < sympy.Rational(1, 10**6):
        raise Retry("rounding tie")
    return Decimal(int(sympy.floor(scaled + sympy.Rational(1, 2)))).scaleb(-places)


def fmt(v: Value) -> str:
    """A value as answers and questions state it."""
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)


def rule_for(v: Value, rivals: tuple[str, ...] = ()) -> AnswerRule:
    """How an answer of this value is matched: names and dates as text, integers exactly,
    decimals within the default tolerance; `rivals` are the other candidates a question offers."""
    if isinstance(v, bool) or isinstance(v, str) or isinstance(v, dt.date):
        return AnswerRule(kind="text", rivals=list(rivals))
    if isinstance(v, int):
        return AnswerRule(kind="numeric", rel_tol=0, abs_tol=0, rivals=list(rivals))
    return AnswerRule(kind="numeric", rivals=list(rivals))
