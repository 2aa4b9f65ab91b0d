"""Does a text contain an answer? The one matching rule used everywhere.

Golden-call validation (`env_registry.validate`), the "solved" test of the reward
(`astra_verl.reward.solved`) and synthesis checks all call `answer_in_text`, so an answer
that validates is exactly an answer the reward recognises.

Rules (see `AnswerRule`):
- numeric: the answer holds exactly one number (units, currency signs and `%` around it are
  ignored); the text matches when any number in it is within
  `max(abs_tol, rel_tol * |answer|)`. Numbers are compared exactly with sympy rationals, so
  `0.1 + 0.2`-style float noise in a tool's output never decides a match. Thousands
  separators (`1,234.5`) are read both ways (1234.5, and 1 / 234.5), as a JSON list `[1,234]`
  would be.
- text: the normalised answer (case-folded, every run of non-alphanumerics one space) appears
  in the normalised text at word boundaries: "New York" matches `{"city": "new york"}` but
  "York" does not match "Yorkshire".
- auto (default): numeric when the answer holds exactly one number and at most three other
  words, text otherwise.
Any alias matching is a match.
"""

from __future__ import annotations

import math
import re
import unicodedata
from functools import lru_cache

import sympy

from env_registry.spec import AnswerRule

_NUMBER = re.compile(
    r"(?<![\w.])[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])"
    r"|(?<![\w.])[-+]?\.\d+(?:[eE][-+]?\d+)?(?![\w])"
)
_NON_ALNUM = re.compile(r"[\W_]+", re.UNICODE)
_MAX_UNIT_WORDS = 3


# The reward checks every call's output against every sub-answer of a trajectory, so the same
# text is scanned many times: scans are cached per text.
@lru_cache(maxsize=8192)
def normalize_text(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    return " " + _NON_ALNUM.sub(" ", text).strip() + " "


@lru_cache(maxsize=65536)
def _rational(literal: str) -> sympy.Rational:
    return sympy.Rational(literal)


@lru_cache(maxsize=8192)
def _number_literals(text: str) -> tuple[tuple[str, float], ...]:
    """Every number literal the text states with its float value (thousands separators read both ways)."""
    out: list[str] = []
    for m in _NUMBER.finditer(text):
        literal = m.group(0)
        if "," in literal:
            out.append(literal.replace(",", ""))
            out.extend(part for part in literal.split(",") if part.strip("+-"))
        else:
            out.append(literal)
    return tuple((lit, float(lit)) for lit in out)


def answer_number(answer: str) -> sympy.Rational | None:
    """The answer's number when the answer is numeric (one number, at most a few unit words)."""
    found = list(_NUMBER.finditer(answer))
    if len(found) != 1:
        return None
    rest = (answer[: found[0].start()] + " " + answer[found[0].end() :]).strip()
    words = [w for w in normalize_text(rest).split() if w]
    if len(words) > _MAX_UNIT_WORDS:
        return None
    literal = found[0].group(0).replace(",", "")
    return _rational(literal)


def _close(a: sympy.Rational, b: sympy.Rational, rule: AnswerRule) -> bool:
    tol = max(sympy.Rational(rule.abs_tol), sympy.Rational(rule.rel_tol) * abs(a))
    return abs(a - b) <= tol


def _number_in_text(number: sympy.Rational, text: str, rule: AnswerRule) -> bool:
    # Floats reject the clear misses cheaply; only candidates near the tolerance boundary (or
    # values floats cannot hold) are decided exactly, so the result equals the exact test.
    a = float(number)
    slack = max(rule.abs_tol, rule.rel_tol * abs(a)) * (1 + 1e-9) + 1e-12 * max(1.0, abs(a))
    for literal, b in _number_literals(text):
        if math.isfinite(a) and math.isfinite(b) and abs(a - b) > slack:
            continue
        if _close(number, _rational(literal), rule):
            return True
    return False


def _one_in_text(answer: str, text: str, rule: AnswerRule) -> bool:
    number = None if rule.kind == "text" else answer_number(answer)
    if number is not None:
        return _number_in_text(number, text, rule)
    if rule.kind == "numeric":
        return False
    needle = normalize_text(answer)
    return needle.strip() != "" and needle in normalize_text(text)


def answer_in_text(answer: str, text: str, rule: AnswerRule | None = None) -> bool:
    """True when `text` contains `answer` (or one of the rule's aliases) under `rule`."""
    rule = rule or AnswerRule()
    if not text:
        return False
    return any(_one_in_text(candidate, text, rule) for candidate in [answer, *rule.aliases])
