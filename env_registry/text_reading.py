"""How the matcher reads a text: its words, its numbers and its dates, and whether a text contains
one answer under a rule (`contains_answer`). `env_registry.matching` (answers in texts and tool
outputs, the right call) and `env_registry.commit` (does a final answer commit to its answer) both
read texts with these readers, so they stand below both; the rules they implement are described
in matching.py's docstring.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from typing import NamedTuple

import sympy

from env_registry.spec import AnswerRule

# Scripts written without spaces between words (CJK ideographs, kana, hangul): every such
# character is a word of its own, and a change of script is a word boundary ("答案是Lepaburg。").
_CJK = "\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CJK_CHAR = re.compile(f"([{_CJK}])")
_WORDISH = f"[^\\W{_CJK}]"  # a word character of a spaced script (letters, digits, _)
# The leading lookahead lets the engine skip every position that cannot start a number before it
# tries the lookbehinds (a tool output is mostly not numbers).
NUMBER = re.compile(
    r"(?=[-+.\d])"
    rf"(?:(?<!{_WORDISH})(?<!\.)[-+]?(?:\d{{1,3}}(?:,\d{{3}})+(?!,?\d)|\d+)(?:\.\d+)?"
    r"(?:[eE][-+]?\d+|\s*[x×*·]\s*10\s*(?:\^|\*\*)\s*[-+]?\d+)?(?![\d.]\d)(?!\d)(?P<pct>\s*%)?"
    rf"|(?<!{_WORDISH})(?<!\.)[-+]?\.\d+(?:[eE][-+]?\d+)?(?!\d)(?P<pct2>\s*%)?)"
)
# A calendar date is not a source of numbers ("2004" is not in "2004-05-06"); dates are matched
# as dates (`_dates_in`).
_NUMERIC_DATE = re.compile(r"(?<!\d)(?:\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{4})(?!\d)")
# "\d[-/]\d", written to start at the rare separator: the engine skips to each "-" or "/" and
# looks back, instead of trying every digit of a number-heavy tool output.
_DATE_HINT = re.compile(r"[-/](?<=\d[-/])\d")
_NAMED_DATE = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?,?\s+\d{4}(?!\d)"
    r"|(?<!\d)\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?\s+\d{4}(?!\d)",
    re.IGNORECASE,
)
_MONTH_HINT = re.compile(
    r"(?i)(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?,?\s+\d|\d\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)"
)


def date_spans(text: str) -> list[re.Match[str]]:
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
        v = literal_value(self.literal)[0]
        return v / 100 if self.percent else v

    @property
    def half_unit(self) -> sympy.Rational:
        h = literal_value(self.literal)[1]
        return h / 100 if self.percent else h


# The reward checks every call's output against every sub-answer of a trajectory, so the same
# text is scanned many times: scans are cached per text.
@lru_cache(maxsize=8192)
def normalize_text(text: str) -> str:
    text = _CJK_CHAR.sub(r" \1 ", unicodedata.normalize("NFKC", text).casefold())
    return " " + _NON_ALNUM.sub(" ", text).strip() + " "


@lru_cache(maxsize=65536)
def rational(literal: str) -> sympy.Rational:
    return sympy.Rational(literal)


_PLAIN = re.compile(r"[-+]?[\d.]+(?:[eE][-+]?\d+)?")


def plain_literal(literal: str) -> str:
    if _PLAIN.fullmatch(literal):
        return literal
    return re.sub(r"\s*[x×*·]\s*10\s*(?:\^|\*\*)\s*", "e", literal.replace(",", ""))


def _decimals(body: str) -> int:
    """Decimals a literal states (0 in scientific notation: its precision is not a rounding)."""
    if "e" in body or "E" in body or "." not in body:
        return 0
    return len(body.split(".")[1])


@lru_cache(maxsize=65536)
def literal_value(literal: str) -> tuple[sympy.Rational, sympy.Rational]:
    """A literal's value (thousands separators dropped, "1.2 × 10^6" read as 1.2e6) and the half
    unit of its last stated decimal (0 when it states none, or too few digits to be a rounding)."""
    body = plain_literal(literal)
    value = rational(body)
    decimals = _decimals(body)
    half = sympy.Rational(5, 10 ** (decimals + 1)) if decimals else sympy.Integer(0)
    if half and half > _ROUNDING_SHARE * abs(value):
        half = sympy.Integer(0)
    return value, half


def _entry(literal: str, percent: bool, start: int, end: int) -> tuple[str, bool, float, int, int]:
    try:
        approx = float(literal)  # the common case: a plain literal
    except ValueError:
        approx = float(plain_literal(literal))
    return (literal, percent, approx * 0.01 if percent else approx, start, end)


_Entry = tuple[str, bool, float, int, int]  # `Reading`'s fields


class _Scan(NamedTuple):
    """A text's number readings, and their finite floats sorted: the reward asks of every call
    output whether some reading is near an answer, and a 1,500-character output holds ~90 numbers,
    so building every `Reading` and testing each one made the reward 1.7x slower per trajectory
    than a bisection of the floats. A text of plain numbers only (the common tool output) keeps its
    literals, and a reading is built from its literal when a bisection finds it."""

    general: tuple[_Entry, ...] | None  # every reading, in text order; None: one per plain literal
    # Plain literals and where each starts (it ends `len(literal)` later). Not the match objects:
    # a cache full of them makes every run of Python's cycle collector walk them all (2x slower).
    literals: tuple[str, ...]
    starts: tuple[int, ...]
    approx: tuple[float, ...]  # each reading's float, in text order
    floats: tuple[float, ...]  # the finite ones, ascending
    at: tuple[int, ...]  # the reading of each of `floats`
    odd: tuple[int, ...]  # readings whose float is not finite: floats cannot rule them out

    def entry(self, i: int) -> _Entry:
        if self.general is not None:
            return self.general[i]
        literal, start = self.literals[i], self.starts[i]
        return (literal, False, self.approx[i], start, start + len(literal))

    def entries(self) -> Iterator[_Entry]:
        return (self.entry(i) for i in range(len(self.approx)))


def _read_general(text: str, found: list[re.Match[str]]) -> list[_Entry]:
    """Every reading of the matched literals: percentages both ways, separators both ways in lists."""
    out: list[_Entry] = []
    for m in found:
        literal = m.group(0)
        a, b = m.span()
        if m.lastindex is not None:  # a percentage: only the named groups `pct` and `pct2` capture
            literal = literal.rstrip("% ").strip()
            out.append(_entry(literal, True, a, b))
        out.append(_entry(literal, False, a, b))
        if "," in literal and (text[a - 1 : a] == "[" or text[b : b + 1] == "]"):
            out.extend(_entry(part, False, a, b) for part in literal.split(",") if part.strip("+-"))
    return out


def _plain_floats(text: str, literals: list[str]) -> list[float] | None:
    """The literals' floats when each is read once, as Python reads it: no percentage, no
    separator, nothing like "1.2 × 10^6" (None otherwise: `_read_general` reads them)."""
    if "%" in text or "," in "".join(literals):
        return None
    try:
        return list(map(float, literals))
    except ValueError:
        return None


@lru_cache(maxsize=8192)
def _scan(text: str) -> _Scan:
    """Every value the text's numbers stand for: numbers inside dates are not read; thousands
    separators are read as such ("1,234" is 1234), and also as list commas inside a bracketed
    list ("[1,234]"); a percentage is read as stated and as a fraction ("25%" is 25 and 0.25)."""
    found = list(NUMBER.finditer(text))
    if found and _DATE_HINT.search(text):
        # ISO and slash dates only: a named month ("July 20, 1976") leaves its numbers readable
        dates = [m.span() for m in _NUMERIC_DATE.finditer(text)]
        found = [m for m in found if not any(a <= m.start() < b for a, b in dates)]
    # Most tool outputs state only plain numbers: they are read in bulk (the reward scans every
    # call output once, and this is most of its time per trajectory); the rest one by one.
    literals = [m.group(0) for m in found]
    approx = _plain_floats(text, literals)
    general, starts = None, [m.start() for m in found]
    if approx is None:
        literals, starts = [], []
        general = tuple(_read_general(text, found))
        approx = [e[2] for e in general]
    if math.isfinite(sum(approx)):  # every float finite (inf or nan would make the sum so)
        order = sorted(range(len(approx)), key=approx.__getitem__)  # stable: ties in text order
        floats, at, odd = tuple([approx[i] for i in order]), tuple(order), ()
    else:
        finite = sorted((f, i) for i, f in enumerate(approx) if math.isfinite(f))
        floats, at = tuple(f for f, _ in finite), tuple(i for _, i in finite)
        odd = tuple(i for i, f in enumerate(approx) if not math.isfinite(f))
    return _Scan(general, tuple(literals), tuple(starts), tuple(approx), floats, at, odd)


@lru_cache(maxsize=8192)
def readings(text: str) -> tuple[Reading, ...]:
    """Every value the text's numbers stand for (`_scan` says how they are read), in text order."""
    return tuple(Reading._make(e) for e in _scan(text).entries())


@lru_cache(maxsize=65536)  # the reward asks it of every sub-answer for every call output
def answer_number(answer: str) -> sympy.Rational | None:
    """The answer's number when the answer is numeric (one number, at most a few unit words)."""
    if date_spans(answer):
        return None
    found = list(NUMBER.finditer(answer))
    if len(found) != 1:
        return None
    rest = (answer[: found[0].start()] + " " + answer[found[0].end() :]).strip()
    words = [w for w in normalize_text(rest).split() if w]
    if len(words) > _MAX_UNIT_WORDS:
        return None
    return literal_value(found[0].group(0).rstrip("% ").strip())[0]


def within_tolerance(a: sympy.Rational, b: sympy.Rational, rule: AnswerRule, half_unit: sympy.Rational = 0) -> bool:
    """`b` agrees with `a`: within the rule's tolerance, or `a` rounded to the decimals `b` states."""
    tol = max(sympy.Rational(rule.abs_tol), sympy.Rational(rule.rel_tol) * abs(a), half_unit)
    return abs(a - b) <= tol


@lru_cache(maxsize=65536)
def _half_float(literal: str) -> float:
    """The half unit of the literal's stated decimals as a float (0 when it is not a rounding)."""
    return float(literal_value(literal)[1])


def _float_miss(a: float, tol: float, r: Reading) -> bool:
    """Floats say `r` cannot agree with `a` (decided exactly only when they cannot say)."""
    if not (math.isfinite(a) and math.isfinite(r.approx)):
        return False
    d, eps = abs(a - r.approx), 1e-12 * max(1.0, abs(a))
    if d > max(tol, _ROUNDING_SHARE_FLOAT * abs(r.approx)) * (1 + 1e-9) + eps:
        return True  # beyond any rounding a literal may state
    half = _half_float(r.literal) * (0.01 if r.percent else 1.0)
    return d > max(tol, half) * (1 + 1e-9) + eps


def _float_hit(a: float, tol: float, r: Reading) -> bool:
    """Floats say `r` agrees with `a` within the tolerance alone: their distance is below it by far
    more than the floats' own rounding (a few ulps of the larger value), so the exact test agrees."""
    if not (math.isfinite(a) and math.isfinite(r.approx)):
        return False
    return abs(a - r.approx) < tol * (1 - 1e-9) - 4e-12 * max(1.0, abs(a), abs(r.approx))


def _agrees(number: sympy.Rational, a: float, tol: float, r: Reading, rule: AnswerRule) -> bool:
    """`r` agrees with `number` (`a` its float, `tol` the rule's tolerance of it as a float): floats
    decide the clear misses and the clear hits, the exact test the rest."""
    if _float_miss(a, tol, r):
        return False
    return _float_hit(a, tol, r) or within_tolerance(number, r.value, rule, r.half_unit)


def agreeing_readings(number: sympy.Rational, text: str, rule: AnswerRule) -> Iterator[Reading]:
    """The readings of `text` that agree with `number` under `rule`."""
    # Floats reject the clear misses cheaply; only candidates near the tolerance boundary (or
    # values floats cannot hold) are decided exactly, so the result equals the exact test.
    a = float(number)
    tol = max(rule.abs_tol, rule.rel_tol * abs(a))
    scan = _scan(text)
    if math.isfinite(a):
        # a reading `_float_miss` keeps lies within max(tol, ~1.01% of |a|) of `a` (its rounding
        # share is 1% of its own value): bisect the sorted floats for those, then test each as before
        bound = max(tol, 0.0102 * abs(a)) * (1 + 1e-6) + 2e-12 * max(1.0, abs(a))
        lo, hi = bisect.bisect_left(scan.floats, a - bound), bisect.bisect_right(scan.floats, a + bound)
        candidates = sorted((*scan.at[lo:hi], *scan.odd))  # text order, as before
    else:
        candidates = range(len(scan.approx))
    for i in candidates:
        r = Reading._make(scan.entry(i))
        if _agrees(number, a, tol, r, rule):
            yield r


def reading_agrees(given: tuple[sympy.Rational, float], r: Reading, rule: AnswerRule) -> bool:
    """`r` agrees with a given number (floats first, exactly near the boundary)."""
    exact, a = given
    return _agrees(exact, a, max(rule.abs_tol, rule.rel_tol * abs(a)), r, rule)


def _number_in_text(number: sympy.Rational, text: str, rule: AnswerRule) -> bool:
    return next(agreeing_readings(number, text, rule), None) is not None


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
    for m in date_spans(text):
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


def normal_phrase(value: str) -> str:
    """The normalised words of `value`, space-separated (the form `phrase_pattern` takes)."""
    return normalize_text(value).strip()


def _is_cjk(ch: str) -> bool:
    return bool(_CJK_CHAR.fullmatch(ch))


@lru_cache(maxsize=4096)
def phrase_pattern(phrase: str) -> re.Pattern[str]:
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


def same_number_as(number: sympy.Rational, reading: Reading, rule: AnswerRule) -> bool:
    """`reading` states `number` under `rule` (its tolerance, or `number` rounded to its decimals)."""
    return reading_agrees((number, float(number)), reading, rule)


def phrase_spans(phrase: str, folded: str) -> list[tuple[int, int]]:
    """Where the phrase occurs in a folded text (NFKC, case-folded), at word boundaries."""
    return [m.span() for m in phrase_pattern(normal_phrase(phrase)).finditer(folded)]


def contains_answer(answer: str, text: str, rule: AnswerRule) -> bool:
    """`text` contains `answer` under `rule` (no commit rule, no aliases)."""
    return bool(text) and _one_in_text(answer, text, rule)
