"""Does a text contain an answer, and is a call the right one? The matching rules used everywhere.

Golden-call validation (`env_registry.validate`), the "solved" test of the reward
(`astra_verl.calls.solved`) and synthesis checks all call these functions, so an answer that
validates is exactly an answer the reward recognises.

Rules (see `AnswerRule`):
- numeric: the answer holds exactly one number (units, currency signs and `%` around it are
  ignored); the text matches when any number in it is within
  `max(abs_tol, rel_tol * |answer|)`, or states the answer rounded to its decimals (at least
  about three significant digits: "94.7" for 94.67). Numbers are compared exactly with sympy
  rationals near the boundary, so `0.1 + 0.2`-style float noise never decides a match. Units
  may be attached ("42km"); scientific notation ("1.2e6", "1.2 × 10^6") and percentages (also
  read as a fraction: "8.4%" is 0.084) are read; thousands separators (`1,234.5`) are read as
  such, and as list commas only inside brackets (`[1,234]`); numbers inside ISO and slash dates
  are not read. Words and numbers are split at script changes (CJK, kana, hangul: every such
  character is a word).
- text: the normalised answer (case-folded, every run of non-alphanumerics one space) appears
  in the normalised text at word boundaries: "New York" matches `{"city": "new york"}` but
  "York" does not match "Yorkshire". A date answer also matches its month-name and slash forms.
- auto (default): numeric when the answer holds exactly one number and at most three other
  words, text otherwise.
- rivals: a text must commit to the answer among the rule's rivals (the other candidates a
  question offers; `env_registry.commit`); a tool output that names a rival does not match; a
  rival inside an occurrence of the answer does not count ("New York City" with "New York").
Any alias matching is a match.

`answer_in_output` is the same test on what a tool returned, not on what it was given: the
values of the call's own arguments are masked in the output first (for a numeric answer every
number within the answer's tolerance of a numeric argument, for a text answer every phrase of a
string argument), so a tool that echoes its inputs returns nothing the caller did not already
have. An argument that is a strict part of a text answer ("York" of "New York") is not masked:
echoing it cannot produce the answer.

`args_agree` says whether a call asked what a golden call asks: its arguments equal the golden
call's on the tool's identifying parameters (`CallKey`), normalised as the matcher normalises
(text case- and punctuation-insensitive, numbers by the answers' tolerance policy: integers
exactly, others within 1e-4 or rounded to the decimals one states; lists as multisets, omitted
parameters at the tool's defaults). Numbers inside string arguments ("about 42") are echoes.

The readers of words, numbers and dates live in `env_registry.text_reading`, below this module
and the commit rule (`env_registry.commit`), which both use them.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

import sympy

from env_registry.commit import commits
from env_registry.spec import AnswerRule, CallCheck
from env_registry.text_reading import (
    NUMBER,
    agreeing_readings,
    answer_number,
    contains_answer,
    date_spans,
    literal_value,
    normal_phrase,
    normalize_text,
    phrase_pattern,
    plain_literal,
    rational,
    readings,
    within_tolerance,
)

__all__ = ["answer_in_output", "answer_in_text", "answer_number", "args_agree", "normalize_text", "same_value"]


def answer_in_text(answer: str, text: str, rule: AnswerRule | None = None) -> bool:
    """True when `text` contains `answer` (or one of the rule's aliases) under `rule`; with rivals
    (a comparison), only when it commits to the answer (`env_registry.commit`)."""
    rule = rule or AnswerRule()
    if not text:
        return False
    if rule.rivals:
        return commits(answer, text, rule)
    return any(contains_answer(c, text, rule) for c in [answer, *rule.aliases])


# -- what a tool returned: its output minus echoes of its arguments -----------------------------

_MASK = " \x00 "  # not alphanumeric, not a number: matches nothing


@lru_cache(maxsize=8192)
def _mask(text: str, phrases: tuple[str, ...], numbers: tuple[str, ...], rel_tol: float, abs_tol: float) -> str:
    """`text` (NFKC, case-folded) with every word-bounded occurrence of `phrases` and every number
    within tolerance of one of `numbers` replaced by a mask; `text` itself when nothing is masked
    (so the matcher's per-text caches still hold)."""
    if not phrases and not numbers:
        return text
    folded = out = unicodedata.normalize("NFKC", text).casefold()
    for phrase in sorted(phrases, key=len, reverse=True):
        out = phrase_pattern(phrase).sub(_MASK, out)
    if numbers:
        rule = AnswerRule(rel_tol=rel_tol, abs_tol=abs_tol)
        spans = sorted({(r.start, r.end) for n in numbers for r in agreeing_readings(rational(n), out, rule)})
        for start, end in reversed(spans):
            out = out[:start] + _MASK + out[end:]
    return text if out == folded else out


def _argument_values(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _argument_values(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _argument_values(v)
    else:
        yield value


@lru_cache(maxsize=4096)
def _echoes(arguments_json: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The phrases and numbers a call's arguments could make a tool echo."""
    phrases, numbers = set(), set()
    for v in _argument_values(json.loads(arguments_json)):
        if isinstance(v, str):
            phrases.add(normal_phrase(v))
            # every number a string states, free text included ("about 42" echoes 42)
            numbers.update(plain_literal(r.literal) for r in readings(v) if not r.percent)
        elif isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
            numbers.add(repr(v))
    phrases.discard("")
    return tuple(sorted(phrases)), tuple(sorted(numbers))


def answer_in_output(answer: str, output: str, arguments: Any, rule: AnswerRule | None = None) -> bool:
    """True when a tool's `output` contains `answer` under `rule` outside the echoes of the call's
    own `arguments` (see the module docstring)."""
    rule = rule or AnswerRule()
    if not output:
        return False
    if not arguments or not isinstance(arguments, dict):
        return answer_in_text(answer, output, rule)
    phrases, numbers = _echoes(json.dumps(arguments, sort_keys=True, default=str))
    for candidate in [answer, *rule.aliases]:
        if rule.kind != "text" and answer_number(candidate) is not None:
            masked = _mask(output, (), numbers, rule.rel_tol, rule.abs_tol)
        else:
            whole = normal_phrase(candidate)
            own = tuple(p for p in phrases if p == whole or not phrase_pattern(p).search(whole))
            masked = _mask(output, own, (), 0.0, 0.0)
        if contains_answer(candidate, masked, rule) and _names_no_rival(candidate, masked, rule):
            return True
    return False


def _names_no_rival(candidate: str, text: str, rule: AnswerRule) -> bool:
    """A tool's output names none of the rule's rivals outside the candidate's own occurrences."""
    if not rule.rivals:
        return True
    rest = _mask(text, (normal_phrase(candidate),), (), 0.0, 0.0)
    plain = rule.model_copy(update={"rivals": [], "aliases": []})
    return not any(contains_answer(r, rest, plain) for r in rule.rivals)


# -- the right call: identifying arguments agree with a golden call's --------------------------

_MISSING = object()
# One tolerance policy for answers and identifying arguments: integers exactly; other numbers
# within the default answer tolerance, or rounded to the decimals one of them states (an honest
# model passes 23.3 on for 23.345).
_ARGUMENT_RULE = AnswerRule()


def _as_number(value: Any) -> tuple[sympy.Rational, sympy.Rational, bool] | None:
    """A value as a number: (value, half unit of its stated decimals, whether it is an integer)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return sympy.Integer(value), sympy.Integer(0), True
    if isinstance(value, float):
        return (*literal_value(repr(value)), False) if math.isfinite(value) else None
    if isinstance(value, str) and NUMBER.fullmatch(value.strip()) and not date_spans(value):
        literal = value.strip().rstrip("% ").strip()
        return (*literal_value(literal), not re.search(r"[.eE]", literal))
    return None


def _same_number(
    a: tuple[sympy.Rational, sympy.Rational, bool], b: tuple[sympy.Rational, sympy.Rational, bool]
) -> bool:
    (va, ha, ia), (vb, hb, ib) = a, b
    if ia and ib:
        return va == vb
    return within_tolerance(va, vb, _ARGUMENT_RULE, hb) or within_tolerance(vb, va, _ARGUMENT_RULE, ha)


def same_value(a: Any, b: Any) -> bool:
    """`a` and `b` are the same argument value as the matcher reads values."""
    na, nb = _as_number(a), _as_number(b)
    if na is not None and nb is not None:
        return _same_number(na, nb)
    if isinstance(a, str) and isinstance(b, str):
        return normalize_text(a) == normalize_text(b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and _covers(list(a), list(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _covers(have: list[Any], want: list[Any]) -> bool:
    """Every item of `want` matches a distinct item of `have`."""
    free = list(have)
    for w in want:
        hit = next((i for i, h in enumerate(free) if same_value(h, w)), None)
        if hit is None:
            return False
        free.pop(hit)
    return True


def _agrees(call: dict[str, Any], golden: dict[str, Any], check: CallCheck) -> bool:
    grouped = {p for group in check.unordered for p in group}
    for p in check.params:
        if p in grouped:
            continue
        mine, theirs = call.get(p, _MISSING), golden.get(p, _MISSING)
        if mine is _MISSING or theirs is _MISSING:
            if mine is not theirs:
                return False
        elif p in check.includes:
            if not (isinstance(mine, list) and isinstance(theirs, list) and _covers(mine, theirs)):
                return False
        elif not same_value(mine, theirs):
            return False
    for group in check.unordered:
        mine = [call.get(p, _MISSING) for p in group]
        theirs = [golden.get(p, _MISSING) for p in group]
        if _MISSING in mine or _MISSING in theirs or not (len(mine) == len(theirs) and _covers(mine, theirs)):
            return False
    return True


def args_agree(arguments: Any, check: CallCheck) -> bool:
    """True when a call with `arguments` asks what one of `check`'s golden calls asks."""
    if not isinstance(arguments, dict):
        return False
    call = {p: arguments.get(p, check.defaults.get(p, _MISSING)) for p in check.params}
    call = {p: v for p, v in call.items() if v is not _MISSING}
    return any(_agrees(call, golden, check) for golden in check.golden)
