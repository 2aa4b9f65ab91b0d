"""Does a text commit to an answer among rivals? The commit rule, now for tool outputs only.

The reward no longer reads a final answer's prose: it reads the answer channel
(`env_registry.answer_channel`, docs/reward.md). This rule remains where a text is not the
policy's answer: a tool output or a validation text that names a comparison's rivals contains
the answer only when it commits to it (`matching.answer_in_text` with rivals). Its known holes
as a reader of answers (issue 48: negations, dumps, retractions, lists, question marks, rivals
named after the winner) are why the reward stopped using it for final answers.

A final answer commits to what it concludes, however it is phrased, and not to everything it
names. It is read as mentions (each occurrence of a candidate: for a comparison the answer, its
rivals and their unambiguous first words, "Vilko" for "Vilko Logistics"; for a number every
number the text states) in sentences, and decided on its conclusion:

- the conclusion is what follows the last conclusion marker ("the answer is", "so", "therefore",
  "答案是", "答えは", "정답은", ...) that names a mention, else the last sentence that names one;
- an object is not a conclusion: a mention after "than", "ahead of", "beats", "not", "vs", "比"
  (or before "より", "보다"), and the mentions listed with it ("X beats Y and Z");
- a comparison commits to its answer when the conclusion's remaining mentions are all the answer,
  or the last of them is the answer and they are not a list ("A, B or C": a hedge);
- a number commits when the answer is among the conclusion's numbers (the whole text when no
  marker names one) and is not joined to another number by "or", "to", "and", a dash or the
  like (a hedge of several values, a range); "from X to Y" is a change, not a range.
An answer without rivals that is not a number (a name, a date) commits when the text contains it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import sympy

from env_registry.spec import AnswerRule
from env_registry.text_reading import (
    answer_number,
    contains_answer,
    normalize_text,
    phrase_spans,
    readings,
    same_number_as,
)

__all__ = ["commits"]

_SENTENCE_END = re.compile(r"[.!?;:](?=\s|$)|[。！？；\n]")
_MARKER = re.compile(
    r"\b(?:(?:the |final |my )?answer(?: is| would be| will be)?|so|therefore|thus|hence|which is|"
    r"winner is|result is|la respuesta es|die antwort ist|la réponse est)\b|[=→]|答案是|答案为|所以|因此|答えは|정답은|따라서"
)
_STRONG_MARKER = re.compile(r"\banswer\b|respuesta|antwort|réponse|答案|答え|정답")
_LIST_WORDS = frozenset(
    "or and either nor the a an to between maybe perhaps possibly probably oder und entweder o y u ou et soit "
    "或 者 和 与 及 到 至 か と や 또 는 와 과 이 나 혹 은".split()
)
_OBJECT_AFTER = re.compile(
    r"(?:\bthan|\bover|\bbeats?|\bbeating|\boutranks|\boutpaces|\bexceeds|\bsurpasses|\btops|\bnot|\bunlike|"
    r"\bvs\.?|\bversus|\bbefore|\bafter|\bahead of|\binstead of|\bcompared (?:to|with)|\bque|\bals|比)\W*$"
)
_OBJECT_BEFORE = re.compile(r"^\W*(?:より|보다)")
_CONNECTIVE = re.compile(r"\b(?:or|to|and|oder|bis|ou|o)\b|[-–—~/]|或|到|至")
_MAX_UNIT_WORDS = 2


@dataclass(frozen=True)
class _Mention:
    start: int
    end: int
    key: object  # True: the answer; anything else: another candidate or number


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _short_forms(names: list[str]) -> list[str]:
    """Each name's first word where it is a word of no other name ("Vilko" of "Vilko Logistics")."""
    words = [normalize_text(n).split() for n in names]
    out = []
    for i, w in enumerate(words):
        first = w[0] if len(w) > 1 else ""
        if len(first) >= 3 and first.isalpha() and not any(first in o for j, o in enumerate(words) if j != i):
            out.append(first)
        else:
            out.append("")
    return out


def _name_mentions(text: str, answer: list[str], rivals: list[str]) -> list[_Mention]:
    names = [*answer, *rivals]
    keys: list[object] = [True] * len(answer) + [f"rival {i}" for i in range(len(rivals))]
    found: list[_Mention] = []
    for phrase, key in [*zip(names, keys, strict=True), *zip(_short_forms(names), keys, strict=True)]:
        found.extend(_Mention(a, b, key) for a, b in phrase_spans(phrase, text) if phrase)
    # a candidate inside a longer one's occurrence is not a mention ("New York" in "New York City")
    found = [m for m in found if not any(o.start <= m.start and m.end <= o.end and o != m for o in found)]
    return sorted(set(found), key=lambda m: (m.start, m.end))


def _number_mentions(text: str, number: sympy.Rational, rule: AnswerRule) -> list[_Mention]:
    spans: dict[tuple[int, int], object] = {}
    for r in readings(text):
        agrees = same_number_as(number, r, rule)
        if agrees or (r.start, r.end) not in spans:
            spans[(r.start, r.end)] = True if agrees else r.approx
    return [_Mention(a, b, k) for (a, b), k in sorted(spans.items())]


def _sentences(text: str) -> list[tuple[int, int]]:
    bounds = [0, *(m.end() for m in _SENTENCE_END.finditer(text)), len(text)]
    return [(a, b) for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


def _conclusion(text: str, mentions: list[_Mention], marker: re.Pattern[str], whole: bool) -> list[_Mention]:
    """The mentions of the conclusion: after the last marker that names one (within its sentence),
    else those of the last sentence naming one (of the whole text when `whole`)."""
    sentences = _sentences(text)
    for a, b in reversed(sentences):
        for m in reversed(list(marker.finditer(text, a, b))):
            after = [x for x in mentions if m.end() <= x.start and x.end <= b]
            if after:
                return after
    if whole:
        return mentions
    for a, b in reversed(sentences):
        inside = [x for x in mentions if a <= x.start < b]
        if inside:
            return inside
    return []


def _is_list_gap(gap: str) -> bool:
    """Only list words, punctuation and the values listed with the names ("X (12) and Y")."""
    return all(w in _LIST_WORDS or w.isdigit() for w in normalize_text(gap).split())


def _subjects(text: str, span: list[_Mention]) -> list[_Mention]:
    """`span` without its objects ("than Y", "beats Y and Z", "Yより")."""
    out, previous_object = [], False
    for i, m in enumerate(span):
        before = text[span[i - 1].end if i else max(0, m.start - 40) : m.start]
        after = text[m.end : span[i + 1].start if i + 1 < len(span) else len(text)]
        obj = bool(_OBJECT_AFTER.search(before) or _OBJECT_BEFORE.search(after))
        obj = obj or (previous_object and i > 0 and _is_list_gap(before))
        if not obj:
            out.append(m)
        previous_object = obj
    return out


def _commits_to_name(answer: list[str], text: str, rivals: list[str]) -> bool:
    folded = _fold(text)
    mentions = _name_mentions(folded, answer, rivals)
    span = _subjects(folded, _conclusion(folded, mentions, _MARKER, whole=False))
    if not span:
        return False
    if all(m.key is True for m in span):
        return True
    gaps = [folded[x.end : y.start] for x, y in zip(span, span[1:], strict=False) if x.key != y.key]
    if any(_is_list_gap(g) for g in gaps):
        return False  # "A, B or C": names every candidate, chooses none
    return span[-1].key is True


def _hedged(text: str, span: list[_Mention], i: int) -> bool:
    """The answer's mention `span[i]` is one of several values ("42 or 57", "40-45")."""
    for j in (i - 1, i + 1):
        if not 0 <= j < len(span) or span[j].key is True:
            continue
        x, y = sorted((span[i], span[j]), key=lambda m: m.start)
        gap = text[x.end : y.start]
        words = [w for w in normalize_text(gap).split() if w not in _LIST_WORDS]
        if not _CONNECTIVE.search(gap) or len(words) > _MAX_UNIT_WORDS:
            continue
        if re.search(r"\bfrom\W*$", text[max(0, x.start - 12) : x.start]) and re.search(r"\bto\b", gap):
            continue  # "from 12.5% to 8.4%": a change, not a range
        return True
    return False


def _commits_to_number(number: sympy.Rational, text: str, rule: AnswerRule) -> bool:
    folded = _fold(text)
    span = _conclusion(folded, _number_mentions(folded, number, rule), _STRONG_MARKER, whole=True)
    return any(m.key is True and not _hedged(folded, span, i) for i, m in enumerate(span))


def commits(answer: str, text: str, rule: AnswerRule | None = None) -> bool:
    """True when the final answer `text` commits to `answer` (or an alias) under `rule`."""
    rule = rule or AnswerRule()
    if not text:
        return False
    forms = [answer, *rule.aliases]
    for form in forms:
        number = None if rule.kind == "text" else answer_number(form)
        if number is not None and _commits_to_number(number, text, rule):
            return True
    if rule.rivals and rule.kind != "numeric":
        return _commits_to_name(forms, text, list(rule.rivals))
    return any(contains_answer(f, text, rule) for f in forms if rule.kind == "text" or answer_number(f) is None)
