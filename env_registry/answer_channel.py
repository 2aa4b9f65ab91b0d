"""The answer channel: the one part of a final answer the reward reads, parsed as one typed value.

A final answer ends with `<answer>VALUE</answer>`; the prose around it is never read. VALUE must
parse to exactly one value of the environment's declared `AnswerType`:

- number: one number with an optional unit or currency before or after it ("156.33 mm",
  "USD 1,200.50", "−3.4 °C", "1.2e6", "1.2 × 10^6", "2.15 million", "8.4%", also read as 0.084); thousands
  separators (",", no-break and thin spaces, "'"; not a plain space: "20 500" may be two numbers); every minus sign (U+2212, dashes, full width);
  "about" / "≈" before it. The one tolerance policy applies (`text_reading.within_tolerance`):
  within the rule's tolerance, or the expected value rounded to the digits the number states when
  they are at least about three significant ones ("1,228" for 1227.79; "2.15 million" for 2,153,400).
- name / text: case, accents, punctuation and a leading "the" folded; equal to the answer or one of
  its aliases (`AnswerRule.aliases`); a name of a comparison must be one of its candidates.
- date: "1976-07-20", "1976/07/20", "July 20, 1976", "20 July 1976", "20.07.1976" (day.month.year),
  "7/20/1976" (month/day/year; day/month/year only where month/day is no date), a weekday before it.

Not an answer, whatever the type: no channel, several channels, an empty one, a question mark, a
negation ("not 156.33"), a list, range or hedge of several values, a dump (braces, brackets, bars,
several lines, over `MAX_WORDS` words). `<answer>cannot answer: CAPABILITY</answer>` is a declared
inability naming the missing capability: it earns nothing on an answerable environment; it is
the root's answer where an environment declines (the unanswerable and missing-function variants,
`env_registry.variants`), read there in the `inability` type.

Why a tag in the text and not a `final_answer` tool: BFCL (and every benchmark that counts calls)
scores any call, so a policy trained to end with a call fails every irrelevance entry; a tag is
plain content to a tool-call parser, and `<answer>` is the form reasoning models already write.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import sympy

from env_registry.matching import answer_in_text
from env_registry.spec import AnswerRule, AnswerType, EnvSpec, RewardTarget, TargetSubQuestion
from env_registry.text_reading import within_tolerance

__all__ = [
    "INABILITY",
    "MAX_WORDS",
    "ChannelValue",
    "Verdict",
    "channel",
    "channel_value",
    "final_message",
    "has_channel",
    "infer_type",
    "is_inability",
    "inferred_type",
    "instruction",
    "judge",
    "parse",
    "read",
    "root_question",
    "type_of",
]

OPEN, CLOSE = "<answer>", "</answer>"
INABILITY = "cannot answer:"  # then the missing capability: "cannot answer: no tool gives exchange rates"
# the prose before the channel of a declining golden answer (`final_message`); a model trained on it
# may say only this, so what reads a model's behaviour looks for both
DECLINE_PROSE = "I cannot answer this with the tools I have:"
MAX_WORDS = 12
_CHANNEL = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_QUESTION = re.compile(r"[?？¿]")
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|neither|nor|isn't|wasn't|aren't|can't|cannot|nicht|kein\w*|nie|pas|jamais|nunca|"
    r"ningun[oa]?|non|не|нет|ни)\b|不|没|沒|非|ない|아니|않",
    re.I,
)
_DUMP = re.compile(r"[{}\[\]|;\n]")
_MINUS = dict.fromkeys(map(ord, "\u2212\u2010\u2011\u2012\u2013\u2014\u2015\ufe63\uff0d"), "-")
_EDGES = " \t*`\"'“”‘’«»「」"
_ROUNDING_SHARE = sympy.Rational(1, 100)  # as text_reading: a stated rounding covers at most 1% of the value


@dataclass(frozen=True)
class ChannelValue:
    """What the channel of a final answer holds, read in one type."""

    content: str | None  # the channel's content (None: no single channel)
    value: object = None  # ((value, half unit), ...) readings of a number, a date, a folded name or text
    problem: str = ""  # why the content is not an answer ("" when it is one)
    inability: str = ""  # the capability a declared inability names

    @property
    def is_answer(self) -> bool:
        return self.value is not None


def channel(value: str) -> str:
    """The channel holding `value`, as a final answer ends with it."""
    return f"{OPEN}{value}{CLOSE}"


# -- the types: each parses a channel's content to its value, or says why it is not one -----------


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text.replace("&", " and "))
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    words = re.sub(r"[\W_]+", " ", text).split()
    return " ".join(words[1:] if len(words) > 1 and words[0] == "the" else words)


_APPROX = re.compile(r"^(?:about|approximately|approx\.?|around|roughly|circa|ca\.|~|≈|≃)\s*", re.I)
_CURRENCY = r"(?:[$€£¥₹]|[A-Z]{3}(?![A-Za-z]))"
_NUMBER = re.compile(
    rf"(?P<s1>[-+])?\s*(?P<pre>{_CURRENCY})?\s*(?P<s2>[-+])?\s*"
    r"(?P<int>\d{1,3}(?:[,\u00a0\u202f\u2009']\d{3})+(?!\d)|\d+)?(?P<frac>\.\d+)?"
    r"(?:\s*(?:[eE](?P<e1>[-+]?\d+)|[x×*·]\s*10\s*(?:\^|\*\*)\s*(?P<e2>[-+]?\d+)))?"
    r"\s*(?P<rest>.*)",
    re.S,
)
_SCALE = {
    "thousand": 3, "million": 6, "millions": 6, "mn": 6, "billion": 9, "billions": 9, "bn": 9, "trillion": 12,
    "tausend": 3, "millionen": 6, "milliarde": 9, "milliarden": 9, "millones": 6, "milliard": 9, "milliards": 9,
}  # fmt: skip
_UNIT_WORD = re.compile(r"[^\W\d_]+\.?|[%°‰/$€£¥₹]|°[CF]")
_CONNECTIVES = frozenset("or and to bis oder ou et o y u e и или either".split())
_MAX_UNIT_WORDS = 4


def _number(content: str) -> tuple[object, str]:
    """The readings (value, half unit of its stated rounding) of the one number the content states,
    the plain one first, or why it states none."""
    # NFKC for full-width digits and signs, but a unit's superscript stays one ("km²" is not "km2")
    text = "".join(c if c in "²³" else unicodedata.normalize("NFKC", c) for c in content.translate(_MINUS))
    text = _APPROX.sub("", text.strip())
    m = _NUMBER.fullmatch(text)
    if m is None or not (m["int"] or m["frac"]):
        return None, "no number"
    if m["s1"] and m["s2"]:
        return None, "two signs"
    rest = m["rest"].strip()
    words = rest.split()
    scale = _SCALE.get(words[0].casefold(), 0) if words else 0
    unit = words[1:] if scale else words
    if re.search(r"\d", rest):
        return None, "several numbers (a list, a range, a hedge or a conversion)"
    if len(unit) > _MAX_UNIT_WORDS or any(w.casefold() in _CONNECTIVES for w in unit):
        return None, "more than a unit after the number"
    if not all(_UNIT_WORD.fullmatch(w) or w.isalpha() for w in " ".join(unit).replace("/", " / ").split()):
        return None, "more than a unit after the number"
    body = re.sub(r"[,\u00a0\u202f\u2009']", "", m["int"] or "0") + (m["frac"] or "")
    exponent = int(m["e1"] or m["e2"] or 0) + scale
    decimals = len(m["frac"]) - 1 if m["frac"] else 0
    value = sympy.Rational(body) * sympy.Rational(10) ** exponent
    if (m["s1"] or m["s2"]) == "-":
        value = -value
    half = sympy.Rational(5, 10 ** (decimals + 1)) * sympy.Rational(10) ** exponent
    half = half if half <= _ROUNDING_SHARE * abs(value) else sympy.Integer(0)
    readings = [(value, half)]
    if scale:  # "7003.6 million LON" may state 7003.6 in a unit of millions
        readings.append((value / 10**scale, half / 10**scale))
    if unit == ["%"]:  # "8.4%" also states the fraction 0.084
        readings.append((value / 100, half / 100))
    return tuple(readings), ""


_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        (
            "january jan",
            "february feb",
            "march mar",
            "april apr",
            "may",
            "june jun",
            "july jul",
            "august aug",
            "september sep sept",
            "october oct",
            "november nov",
            "december dec",
        )
    )  # fmt: skip
    for name in names.split()
}
_MONTH = r"(?P<month>[a-z]+)\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_WEEKDAY = r"(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day,?\s+)?"
_DATES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(_WEEKDAY + pattern), order)
    for pattern, order in (
        (r"(?P<year>\d{4})[-/](?P<m>\d{1,2})[-/](?P<d>\d{1,2})", "ymd"),
        (rf"{_MONTH}\s+{_DAY},?\s+(?P<year>\d{{4}})", "named"),
        (rf"{_DAY}\.?\s+(?:of\s+)?{_MONTH},?\s+(?P<year>\d{{4}})", "named"),
        (r"(?P<d>\d{1,2})\.(?P<m>\d{1,2})\.(?P<year>\d{4})", "dmy"),
        (r"(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<year>\d{4})", "mdy"),
    )
)


def _date(content: str) -> tuple[object, str]:
    text = " ".join(unicodedata.normalize("NFKC", content).casefold().split()).rstrip(".")
    for pattern, order in _DATES:
        m = pattern.fullmatch(text)
        if m is None:
            continue
        year = int(m["year"])
        if order == "named":
            options = [(_MONTHS.get(m["month"]), int(m["day"]))]
        else:  # month/day first; its reverse only where month/day is no date (20/7/1976)
            options = [(int(m["m"]), int(m["d"]))] + ([(int(m["d"]), int(m["m"]))] if order == "mdy" else [])
        for month, day in options:
            try:
                return dt.date(year, month or 0, day), ""
            except ValueError:
                continue
        return None, "no calendar date"
    return None, "no date in a known form"


_HEDGE_WORDS = frozenset("or either oder ou или 或 还是".split())


def _name(content: str) -> tuple[object, str]:
    folded = _fold(content)
    if not folded:
        return None, "no name"
    if _HEDGE_WORDS & set(folded.split()):
        return None, "several values (a hedge: 'or', 'either')"
    return folded, ""


@dataclass(frozen=True)
class _Type:
    parse: Callable[[str], tuple[object, str]]
    # does a parsed value state an expected one: (got, expected, rule) -> bool
    agrees: Callable[[object, object, AnswerRule], bool]
    what: str  # what the system prompt asks the channel to hold
    example: str


def _near(want: sympy.Rational, value: sympy.Rational, rule: AnswerRule, half: sympy.Rational) -> bool:
    """`within_tolerance`, with floats settling clear misses and clear hits (exact only near the
    boundary, where float noise could decide)."""
    a, b = float(want), float(value)
    tol = max(rule.abs_tol, rule.rel_tol * abs(a), float(half))
    slack = tol * 1e-9 + 1e-12 * max(1.0, abs(a))
    if abs(a - b) > tol + slack:
        return False
    return abs(a - b) < tol - slack or within_tolerance(want, value, rule, half)


def _same_number(got: object, expected: object, rule: AnswerRule) -> bool:
    """One of the channel's readings of its number is within the tolerance policy of the expected
    value (its first reading): a percentage also reads as the fraction it states ("8.4%" for
    0.084), a scale word also as part of the unit ("7003.6 million LON" for 7003.6)."""
    want = expected[0][0]  # type: ignore[index]
    return any(_near(want, value, rule, half) for value, half in got)  # type: ignore[attr-defined]


def _same(got: object, expected: object, rule: AnswerRule) -> bool:
    return got == expected


def _no_inability(content: str) -> tuple[object, str]:
    # `parse` reads a declared inability before the type; any other content is not one
    return None, "not a declared inability (cannot answer: CAPABILITY)"


def _any_capability(got: object, expected: object, rule: AnswerRule) -> bool:
    # The capability's wording is free: a policy cannot know the name of a tool it was not shown,
    # and a rule reading which capability a phrase names would be the prose reading issue 48 ended.
    return True


TYPES: dict[AnswerType, _Type] = {
    # the examples show the form only: none is a value of the procedural vocabulary, so copying one earns nothing
    AnswerType.NUMBER: _Type(_number, _same_number, "one number, with its unit if it has one", "1,234.5 km"),
    AnswerType.NAME: _Type(_name, _same, "one name", "Example Company"),
    AnswerType.DATE: _Type(_date, _same, "one date", "2020-01-31"),
    AnswerType.TEXT: _Type(_name, _same, "one short value (a word or a few)", "example"),
    # the root of an unanswerable or missing-function environment (never a declared type, so never
    # in a system prompt: the prompt shows the type the question would have)
    AnswerType.INABILITY: _Type(_no_inability, _any_capability, "a declared inability", "cannot answer: example"),
}


def instruction(answer_type: AnswerType | None) -> str:
    """What every exported row's system prompt says about the channel (None: no answer expected)."""
    if answer_type is None:
        return ""
    kind = TYPES[answer_type]
    return (
        f"End your final answer with {OPEN}...{CLOSE} around {kind.what}, and nothing else inside it (the form: "
        f"{channel(kind.example)}). Write whatever you like before it; only the value inside is read. If the "
        f"tools cannot answer the question, end with {channel('cannot answer: <the capability that is missing>')}."
    )


# -- reading a final answer ---------------------------------------------------------------------


def _screen(content: str) -> str:
    """Why the content is no single value whatever its type ("" when it may be one)."""
    if not content:
        return "an empty channel"
    if _QUESTION.search(content):
        return "a question mark"
    if _NEGATION.search(content):
        return "a negation"
    if _DUMP.search(content) or len(content.split()) > MAX_WORDS:
        return "a list or a dump, not one value"
    return ""


@lru_cache(maxsize=2048)
def parse(content: str, answer_type: AnswerType) -> ChannelValue:
    """The channel's content read as one value of `answer_type`."""
    content = content.strip().strip(_EDGES).strip()
    content = content[:-1].rstrip() if content.endswith((".", "。")) else content
    if content.casefold().startswith(INABILITY):
        capability = content[len(INABILITY) :].strip()
        if capability and answer_type is AnswerType.INABILITY:
            return ChannelValue(content, _fold(capability), inability=capability)
        why = "a declared inability" if capability else "a declared inability naming no missing capability"
        return ChannelValue(content, problem=why, inability=capability)
    problem = _screen(content)
    if problem:
        return ChannelValue(content, problem=problem)
    value, problem = TYPES[answer_type].parse(content)
    return ChannelValue(content, value, problem)


@lru_cache(maxsize=4096)
def read(final_answer: str, answer_type: AnswerType) -> ChannelValue:
    """The final answer's channel (the last `<answer>...</answer>`, alone) read in `answer_type`."""
    found = _CHANNEL.findall(final_answer or "")
    if not found:
        return ChannelValue(None, problem=f"no {OPEN}...{CLOSE} channel")
    if len(found) > 1:
        return ChannelValue(None, problem=f"{len(found)} answer channels (one value is an answer)")
    return parse(found[0], answer_type)


@lru_cache(maxsize=4096)
def _expected(answer: str, answer_type: AnswerType) -> object:
    return parse(answer, answer_type).value


@dataclass(frozen=True)
class Verdict:
    """Whether a final answer's channel states an expected answer, and why (for the viewer)."""

    counted: bool
    content: str | None
    why: str


def judge(final_answer: str, answer: str, rule: AnswerRule, answer_type: AnswerType | None) -> Verdict:
    """Does the final answer's channel state `answer` (or an alias) in `answer_type`?"""
    if answer_type is None:
        return Verdict(False, None, f"the environment declares no answer type and {answer!r} has none")
    got = read(final_answer, answer_type)
    if not got.is_answer:
        return Verdict(False, got.content, f"not an answer: {got.problem}")
    kind = TYPES[answer_type]
    forms = [answer, *rule.aliases]
    if any((want := _expected(f, answer_type)) is not None and kind.agrees(got.value, want, rule) for f in forms):
        return Verdict(True, got.content, f"{_shown(got.value)} states the answer {answer!r}")
    if answer_type is AnswerType.NAME and rule.rivals and not any(_fold(r) == got.value for r in rule.rivals):
        return Verdict(False, got.content, f"{_shown(got.value)} is none of the candidates")
    return Verdict(False, got.content, f"{_shown(got.value)} is not the answer {answer!r}")


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        number = value[0][0]
        return repr(str(number) if number.is_integer else repr(float(number)))
    return repr(str(value))


# -- the types of environments and sub-questions --------------------------------------------------


@lru_cache(maxsize=8192)
def infer_type(answer: str, candidates: bool = False) -> AnswerType | None:
    """The type an answer parses in (date, then number, then name: a candidate of a comparison or
    a capitalised phrase, then text); None when it parses in none (several values, a sentence)."""
    for answer_type in (AnswerType.DATE, AnswerType.NUMBER):
        if parse(answer, answer_type).is_answer:
            return answer_type
    if not parse(answer, AnswerType.NAME).is_answer:
        return None
    capitalised = all(w[:1].isupper() or not w[:1].isalpha() for w in answer.split())
    return AnswerType.NAME if candidates or capitalised else AnswerType.TEXT


def root_question(target: RewardTarget) -> TargetSubQuestion:
    """The sub-question the user's question asks: the last one whose answer the environment's
    final answer states (else the last one)."""
    key = tuple(
        (q.answer, q.match.kind, tuple(q.match.aliases), q.match.rel_tol, q.match.abs_tol) for q in target.sub_questions
    )
    return target.sub_questions[_root_index(target.final_answer, key)]


@lru_cache(maxsize=4096)
def _root_index(final_answer: str, answers: tuple[tuple[str, str, tuple[str, ...], float, float], ...]) -> int:
    """`root_question` on what decides it (scored once per environment, not once per episode)."""
    for i in reversed(range(len(answers))):
        answer, kind, aliases, rel_tol, abs_tol = answers[i]
        plain = AnswerRule(kind=kind, aliases=list(aliases), rel_tol=rel_tol, abs_tol=abs_tol)
        if answer_in_text(answer, final_answer, plain):
            return i
    return len(answers) - 1


def type_of(target: RewardTarget, q: TargetSubQuestion) -> AnswerType | None:
    """The type the channel is read in for `q`: the environment's declared type for its root
    (inferred from the root's answer for a target that declares none: rows of version-2 specs), the
    type its own answer parses in for another sub-question scored from the final answer."""
    if is_inability(q.answer):
        return AnswerType.INABILITY  # a declining root (unanswerable, missing-function environments)
    if target.answer_type is not None and q.id == root_question(target).id:
        return target.answer_type
    return infer_type(q.answer, bool(q.match.rivals))


def is_inability(answer: str) -> bool:
    """An expected answer that is a declared inability: the root of an environment that declines."""
    return answer.strip().casefold().startswith(INABILITY)


def has_channel(text: str) -> bool:
    """The text holds an answer channel (a turn that answers, not one that asks the user)."""
    return bool(_CHANNEL.search(text or ""))


def channel_value(spec: EnvSpec) -> str:
    """What a demonstration of `spec` puts in the channel: its final answer where that is one value
    of its type stating the root's answer ("156.33 mm"), else the root's answer itself."""
    target = spec.reward_target()
    root = root_question(target)
    answer_type = type_of(target, root)
    if answer_type is not None and judge(channel(spec.final_answer), root.answer, root.match, answer_type).counted:
        return spec.final_answer
    return root.answer


def inferred_type(spec: EnvSpec) -> AnswerType | None:
    """The answer type an environment without a declared one gets where its data allows: the type
    its root's answer parses in (importers, data_synth's verified answers); None without
    sub-questions or where the root's answer parses in none (validation then refuses it)."""
    if not spec.sub_questions:
        return None
    root = root_question(spec.reward_target())
    return infer_type(root.answer, bool(root.match.rivals))


def final_message(spec: EnvSpec) -> str:
    """An honest final answer to `spec`: its prose answer, then the channel (golden SFT
    demonstrations, the honest policy of the benches, the golden-episode tests). A declining
    environment's (its root expects `cannot answer: CAPABILITY`) says so in prose first."""
    value = channel_value(spec)
    if is_inability(value):
        capability = value.strip()[len(INABILITY) :].strip()
        return f"{DECLINE_PROSE} {capability}.\n{channel(value)}"
    return f"{spec.final_answer}\n{channel(value)}"
