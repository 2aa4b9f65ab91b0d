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
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from typing import Any, NamedTuple

import sympy

from env_registry.spec import AnswerRule, CallCheck

# Scripts written without spaces between words (CJK ideographs, kana, hangul): every such
# character is a word of its own, and a change of script is a word boundary ("答案是Lepaburg。").
_CJK = "\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_CHAR = re.compile(f"([{_CJK}])")
_WORDISH = f"[^\\W{_CJK}]"  # a word character of a spaced script (letters, digits, _)
# The leading lookahead lets the engine skip every position that cannot start a number before it
# tries the lookbehinds (a tool output is mostly not numbers).
_NUMBER = re.compile(
    r"(?=[-+.\d])"
    rf"(?:(?<!{_WORDISH})(?<!\.)[-+]?(?:\d{{1,3}}(?:,\d{{3}})+(?!,?\d)|\d+)(?:\.\d+)?"
    r"(?:[eE][-+]?\d+|\s*[x×*·]\s*10\s*(?:\^|\*\*)\s*[-+]?\d+)?(?![\d.]\d)(?!\d)(?P<pct>\s*%)?"
    rf"|(?<!{_WORDISH})(?<!\.)[-+]?\.\d+(?:[eE][-+]?\d+)?(?!\d)(?P<pct2>\s*%)?)"
)
# A calendar date is not a source of numbers ("2004" is not in "2004-05-06"); dates are matched
# as dates (`_dates_in`).
_NUMERIC_DATE = re.compile(r"(?<!\d)(?:\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{4})(?!\d)")
_DATE_HINT = re.compile(r"\d[-/]\d")
_NAMED_DATE = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}(?!\d)"
    r"|(?<!\d)\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?\s+\d{4}(?!\d)",
    re.IGNORECASE,
)
_MONTH_HINT = re.compile(
    r"(?i)(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?\s+\d|\d\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
)


def _date_spans(text: str) -> list[re.Match[str]]:
    """The calendar dates of a text (the named-month search only where a month may be named)."""
    found = list(_NUMERIC_DATE.finditer(text))
    if _MONTH_HINT.search(text):
        found += _NAMED_DATE.finditer(text)
    return found


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_ISO_DATE = re.compile(r"\s*(\d{4})-(\d{2})-(\d{2})\s*")
_NON_ALNUM = re.compile(r"[\W_]+", re.UNICODE)
_MAX_UNIT_WORDS = 3
# Stated precision: "94.7" states 94.67 rounded to one decimal. A number agrees with a value
# it rounds (half a unit of its last decimal) when that half unit is at most this share of it.
_ROUNDING_SHARE = sympy.Rational(1, 100)
_ROUNDING_SHARE_FLOAT = 0.01


class Reading(NamedTuple):
    """One value a number literal of a text stands for, and how precisely the text stated it.
    Exact values are made only when a float comparison cannot decide (`value`, `half_unit`)."""

    literal: str  # thousands separators, "× 10^n" and all, as the text states it
    percent: bool  # read as a fraction of the stated percentage
    approx: float
    start: int
    end: int

    @property
    def value(self) -> sympy.Rational:
        v = _literal_value(self.literal)[0]
        return v / 100 if self.percent else v

    @property
    def half_unit(self) -> sympy.Rational:
        h = _literal_value(self.literal)[1]
        return h / 100 if self.percent else h


# The reward checks every call's output against every sub-answer of a trajectory, so the same
# text is scanned many times: scans are cached per text.
@lru_cache(maxsize=8192)
def normalize_text(text: str) -> str:
    text = _CJK_CHAR.sub(r" \1 ", unicodedata.normalize("NFKC", text).casefold())
    return " " + _NON_ALNUM.sub(" ", text).strip() + " "


@lru_cache(maxsize=65536)
def _rational(literal: str) -> sympy.Rational:
    return sympy.Rational(literal)


_PLAIN = re.compile(r"[-+]?[\d.]+(?:[eE][-+]?\d+)?")


def _body(literal: str) -> str:
    if _PLAIN.fullmatch(literal):
        return literal
    return re.sub(r"\s*[x×*·]\s*10\s*(?:\^|\*\*)\s*", "e", literal.replace(",", ""))


def _decimals(body: str) -> int:
    """Decimals a literal states (0 in scientific notation: its precision is not a rounding)."""
    if "e" in body or "E" in body or "." not in body:
        return 0
    return len(body.split(".")[1])


@lru_cache(maxsize=65536)
def _literal_value(literal: str) -> tuple[sympy.Rational, sympy.Rational]:
    """A literal's value (thousands separators dropped, "1.2 × 10^6" read as 1.2e6) and the half
    unit of its last stated decimal (0 when it states none, or too few digits to be a rounding)."""
    body = _body(literal)
    value = _rational(body)
    decimals = _decimals(body)
    half = sympy.Rational(5, 10 ** (decimals + 1)) if decimals else sympy.Integer(0)
    if half and half > _ROUNDING_SHARE * abs(value):
        half = sympy.Integer(0)
    return value, half


def _reading(literal: str, percent: bool, start: int, end: int) -> Reading:
    try:
        approx = float(literal)  # the common case: a plain literal
    except ValueError:
        approx = float(_body(literal))
    return Reading(literal, percent, approx * 0.01 if percent else approx, start, end)


@lru_cache(maxsize=8192)
def _readings_of(text: str) -> tuple[Reading, ...]:
    """Every value the text's numbers stand for: numbers inside dates are not read; thousands
    separators are read as such ("1,234" is 1234), and also as list commas inside a bracketed
    list ("[1,234]"); a percentage is read as stated and as a fraction ("25%" is 25 and 0.25)."""
    # ISO and slash dates only: a named month ("July 20, 1976") leaves its numbers readable
    dates = [m.span() for m in _NUMERIC_DATE.finditer(text)] if _DATE_HINT.search(text) else []
    out: list[Reading] = []
    for m in _NUMBER.finditer(text):
        if dates and any(a <= m.start() < b for a, b in dates):
            continue
        literal = m.group(0)
        a, b = m.span()
        if m.lastindex is not None:  # a percentage: only the named groups `pct` and `pct2` capture
            literal = literal.rstrip("% ").strip()
            out.append(_reading(literal, True, a, b))
        out.append(_reading(literal, False, a, b))
        if "," in literal and (text[a - 1 : a] == "[" or text[b : b + 1] == "]"):
            out.extend(_reading(part, False, a, b) for part in literal.split(",") if part.strip("+-"))
    return tuple(out)


def answer_number(answer: str) -> sympy.Rational | None:
    """The answer's number when the answer is numeric (one number, at most a few unit words)."""
    if _date_spans(answer):
        return None
    found = list(_NUMBER.finditer(answer))
    if len(found) != 1:
        return None
    rest = (answer[: found[0].start()] + " " + answer[found[0].end() :]).strip()
    words = [w for w in normalize_text(rest).split() if w]
    if len(words) > _MAX_UNIT_WORDS:
        return None
    return _literal_value(found[0].group(0).rstrip("% ").strip())[0]


def _close(a: sympy.Rational, b: sympy.Rational, rule: AnswerRule, half_unit: sympy.Rational = 0) -> bool:
    """`b` agrees with `a`: within the rule's tolerance, or `a` rounded to the decimals `b` states."""
    tol = max(sympy.Rational(rule.abs_tol), sympy.Rational(rule.rel_tol) * abs(a), half_unit)
    return abs(a - b) <= tol


@lru_cache(maxsize=65536)
def _half_float(literal: str) -> float:
    """The half unit of the literal's stated decimals as a float (0 when it is not a rounding)."""
    return float(_literal_value(literal)[1])


def _float_miss(a: float, tol: float, r: Reading) -> bool:
    """Floats say `r` cannot agree with `a` (decided exactly only when they cannot say)."""
    if not (math.isfinite(a) and math.isfinite(r.approx)):
        return False
    d, eps = abs(a - r.approx), 1e-12 * max(1.0, abs(a))
    if d > max(tol, _ROUNDING_SHARE_FLOAT * abs(r.approx)) * (1 + 1e-9) + eps:
        return True  # beyond any rounding a literal may state
    half = _half_float(r.literal) * (0.01 if r.percent else 1.0)
    return d > max(tol, half) * (1 + 1e-9) + eps


def _agreeing(number: sympy.Rational, text: str, rule: AnswerRule) -> Iterator[Reading]:
    """The readings of `text` that agree with `number` under `rule`."""
    # Floats reject the clear misses cheaply; only candidates near the tolerance boundary (or
    # values floats cannot hold) are decided exactly, so the result equals the exact test.
    a = float(number)
    tol = max(rule.abs_tol, rule.rel_tol * abs(a))
    for r in _readings_of(text):
        if not _float_miss(a, tol, r) and _close(number, r.value, rule, r.half_unit):
            yield r


def _near(given: tuple[sympy.Rational, float], r: Reading, rule: AnswerRule) -> bool:
    """`r` agrees with a given number (floats first, exactly near the boundary)."""
    exact, a = given
    return not _float_miss(a, max(rule.abs_tol, rule.rel_tol * abs(a)), r) and _close(exact, r.value, rule, r.half_unit)


def _number_in_text(number: sympy.Rational, text: str, rule: AnswerRule) -> bool:
    return next(_agreeing(number, text, rule), None) is not None


def _date_of(answer: str) -> dt.date | None:
    m = _ISO_DATE.fullmatch(answer)
    if not m:
        return None
    try:
        return dt.date(int(m[1]), int(m[2]), int(m[3]))
    except ValueError:
        return None


@lru_cache(maxsize=8192)
def _dates_in(text: str) -> frozenset[dt.date]:
    """The calendar dates a text states, in ISO, month-name or slash form ("7/20/1976" and
    "20/7/1976" both read as 20 July 1976)."""
    out: set[dt.date] = set()
    for m in _date_spans(text):
        nums = [int(n) for n in re.findall(r"\d+", m.group(0))]
        month = next((i + 1 for i, name in enumerate(_MONTHS) if name in m.group(0).casefold()), None)
        if month is not None:
            options = [(nums[-1], month, nums[0])]
        elif "-" in m.group(0):
            options = [(nums[0], nums[1], nums[2])]
        else:
            options = [(nums[2], nums[0], nums[1]), (nums[2], nums[1], nums[0])]
        for y, mo, d in options:
            try:
                out.add(dt.date(y, mo, d))
            except ValueError:
                continue
    return frozenset(out)


def _one_in_text(answer: str, text: str, rule: AnswerRule) -> bool:
    number = None if rule.kind == "text" else answer_number(answer)
    if number is not None:
        return _number_in_text(number, text, rule)
    if rule.kind == "numeric":
        return False
    needle = normalize_text(answer)
    if needle.strip() != "" and needle in normalize_text(text):
        return True
    date = _date_of(answer)
    return date is not None and date in _dates_in(text)


# -- for the commit rule (`env_registry.commit`) ----------------------------------------------


def readings(text: str) -> tuple[Reading, ...]:
    """Every value the numbers of `text` stand for, with its span (see `_readings_of`)."""
    return _readings_of(text)


def same_number_as(number: sympy.Rational, reading: Reading, rule: AnswerRule) -> bool:
    """`reading` states `number` under `rule` (its tolerance, or `number` rounded to its decimals)."""
    return _near((number, float(number)), reading, rule)


def phrase_spans(phrase: str, folded: str) -> list[tuple[int, int]]:
    """Where the phrase occurs in a folded text (NFKC, case-folded), at word boundaries."""
    return [m.span() for m in _phrase_pattern(_phrase(phrase)).finditer(folded)]


def contains_answer(answer: str, text: str, rule: AnswerRule) -> bool:
    """`text` contains `answer` under `rule` (no commit rule, no aliases)."""
    return bool(text) and _one_in_text(answer, text, rule)


def answer_in_text(answer: str, text: str, rule: AnswerRule | None = None) -> bool:
    """True when `text` contains `answer` (or one of the rule's aliases) under `rule`; with rivals
    (a comparison), only when it commits to the answer (`env_registry.commit`)."""
    rule = rule or AnswerRule()
    if not text:
        return False
    if rule.rivals:
        from env_registry.commit import commits  # the commit rule reads texts with this module's readers

        return commits(answer, text, rule)
    return any(_one_in_text(c, text, rule) for c in [answer, *rule.aliases])


# -- what a tool returned: its output minus echoes of its arguments -----------------------------

_MASK = " \x00 "  # not alphanumeric, not a number: matches nothing


def _phrase(value: str) -> str:
    return normalize_text(value).strip()


def _is_cjk(ch: str) -> bool:
    return bool(_CJK_CHAR.fullmatch(ch))


@lru_cache(maxsize=4096)
def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    """A normalised phrase in a folded text: its words in order with separators between them, and
    no word character of the same script around it (a CJK character is a word by itself)."""
    words = phrase.split()
    if not words:
        return re.compile(r"(?!)")
    body = re.escape(words[0])
    for prev, word in zip(words, words[1:], strict=False):
        joint = r"[\W_]*" if _is_cjk(prev[-1]) or _is_cjk(word[0]) else r"[\W_]+"
        body += joint + re.escape(word)
    before = "" if _is_cjk(words[0][0]) else f"(?<!{_WORDISH})"
    after = "" if _is_cjk(words[-1][-1]) else f"(?!{_WORDISH})"
    return re.compile(before + body + after)


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
        given = [(_rational(n), float(n)) for n in numbers]
        spans = sorted({(r.start, r.end) for r in _readings_of(out) if any(_near(g, r, rule) for g in given)})
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
            phrases.add(_phrase(v))
            # every number a string states, free text included ("about 42" echoes 42)
            numbers.update(_body(r.literal) for r in _readings_of(v) if not r.percent)
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
        if _one_in_text(candidate, masked, rule) and _names_no_rival(candidate, masked, rule):
            return True
    return False


def _names_no_rival(candidate: str, text: str, rule: AnswerRule) -> bool:
    """A tool's output names none of the rule's rivals outside the candidate's own occurrences."""
    if not rule.rivals:
        return True
    rest = _mask(text, (_phrase(candidate),), (), 0.0, 0.0)
    plain = rule.model_copy(update={"rivals": [], "aliases": []})
    return not any(_one_in_text(r, rest, plain) for r in rule.rivals)


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
        return (*_literal_value(repr(value)), False) if math.isfinite(value) else None
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip()) and not _date_spans(value):
        literal = value.strip().rstrip("% ").strip()
        return (*_literal_value(literal), not re.search(r"[.eE]", literal))
    return None


def _same_number(
    a: tuple[sympy.Rational, sympy.Rational, bool], b: tuple[sympy.Rational, sympy.Rational, bool]
) -> bool:
    (va, ha, ia), (vb, hb, ib) = a, b
    if ia and ib:
        return va == vb
    return _close(va, vb, _ARGUMENT_RULE, hb) or _close(vb, va, _ARGUMENT_RULE, ha)


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
