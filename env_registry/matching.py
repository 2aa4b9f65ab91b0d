"""Does a text contain an answer, and is a call the right one? The matching rules used everywhere.

Golden-call validation (`env_registry.validate`), the "solved" test of the reward
(`astra_verl.reward.solved`) and synthesis checks all call these functions, so an answer that
validates is exactly an answer the reward recognises.

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
- rivals: a text that also names one of the rule's rivals (the other candidates a question
  offers) does not commit to the answer and does not match; a rival inside an occurrence of
  the answer does not count ("New York City" with the rival "New York").
Any alias matching is a match.

`answer_in_output` is the same test on what a tool returned, not on what it was given: the
values of the call's own arguments are masked in the output first (for a numeric answer every
number within the answer's tolerance of a numeric argument, for a text answer every phrase of a
string argument), so a tool that echoes its inputs returns nothing the caller did not already
have. An argument that is a strict part of a text answer ("York" of "New York") is not masked:
echoing it cannot produce the answer.

`args_agree` says whether a call asked what a golden call asks: its arguments equal the golden
call's on the tool's identifying parameters (`CallKey`), normalised as the matcher normalises
(text case- and punctuation-insensitive, numbers by value, lists as multisets, omitted
parameters at the tool's defaults).
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

from env_registry.spec import AnswerRule, CallCheck

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
    """True when `text` contains `answer` (or one of the rule's aliases) under `rule`, and names
    none of the rule's rivals."""
    rule = rule or AnswerRule()
    if not text:
        return False
    return any(_one_in_text(c, text, rule) and _commits(c, text, rule) for c in [answer, *rule.aliases])


def _commits(candidate: str, text: str, rule: AnswerRule) -> bool:
    if not rule.rivals:
        return True
    rest = _mask(text, (_phrase(candidate),), (), 0.0, 0.0)
    plain = rule.model_copy(update={"rivals": [], "aliases": []})
    return not any(_one_in_text(r, rest, plain) for r in rule.rivals)


# -- what a tool returned: its output minus echoes of its arguments -----------------------------

_MASK = " \x00 "  # not alphanumeric, not a number: matches nothing


def _phrase(value: str) -> str:
    return normalize_text(value).strip()


@lru_cache(maxsize=4096)
def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in phrase.split()]
    return re.compile(r"(?<![^\W_])" + r"[\W_]+".join(words) + r"(?![^\W_])")


def _readings(literal: str) -> Iterator[str]:
    """A number literal as the matcher reads it (thousands separators both ways)."""
    if "," not in literal:
        yield literal
        return
    yield literal.replace(",", "")
    yield from (part for part in literal.split(",") if part.strip("+-"))


@lru_cache(maxsize=8192)
def _mask(text: str, phrases: tuple[str, ...], numbers: tuple[str, ...], rel_tol: float, abs_tol: float) -> str:
    """`text` (NFKC, case-folded) with every word-bounded occurrence of `phrases` and every number
    within tolerance of one of `numbers` replaced by a mask; `text` itself when nothing is masked
    (so the matcher's per-text caches still hold)."""
    if not phrases and not numbers:
        return text
    folded = out = unicodedata.normalize("NFKC", text).casefold()
    for phrase in sorted(phrases, key=len, reverse=True):
        out = _phrase_pattern(phrase).sub(_MASK, out)
    if numbers:
        rule = AnswerRule(rel_tol=rel_tol, abs_tol=abs_tol)
        given = [_rational(n) for n in numbers]

        def echoed(m: re.Match[str]) -> str:
            near = any(_close(g, _rational(r), rule) for r in _readings(m.group(0)) for g in given)
            return _MASK if near else m.group(0)

        out = _NUMBER.sub(echoed, out)
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
            phrases.add(_phrase(v))
            if _NUMBER.fullmatch(v.strip()):
                numbers.add(v.strip().replace(",", ""))
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
            whole = _phrase(candidate)
            own = tuple(p for p in phrases if p == whole or not _phrase_pattern(p).search(whole))
            masked = _mask(output, own, (), 0.0, 0.0)
        if _one_in_text(candidate, masked, rule) and _commits(candidate, masked, rule):
            return True
    return False


# -- the right call: identifying arguments agree with a golden call's --------------------------

_MISSING = object()
_SAME_NUMBER_REL = 1e-9  # float noise in a model-computed argument, nothing more


def _as_number(value: Any) -> sympy.Rational | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, float):
        return _rational(repr(value)) if math.isfinite(value) else None
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()):
        return _rational(value.strip().replace(",", ""))
    return None


def same_value(a: Any, b: Any) -> bool:
    """`a` and `b` are the same argument value as the matcher reads values."""
    na, nb = _as_number(a), _as_number(b)
    if na is not None and nb is not None:
        return abs(na - nb) <= _SAME_NUMBER_REL * max(abs(na), abs(nb))
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
