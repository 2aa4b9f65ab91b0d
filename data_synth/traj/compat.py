"""Schema compatibility of a tool pair: can what A returns, or the task, feed B's inputs?

ASTRA's released scripts draw an edge A -> B whenever an LLM proposes a chain through it; they
never look at the parameters (docs/method.md §1.1, **fix**). This module scores the data flow; pure
functions, no I/O. The rule, all constants named below:

1. *Fields of A.* With a documented output schema (BFCL `response`, MCP `outputSchema`), every
   property, recursively (array items and nested objects included), is a field with a name, a
   type and a description. Without one, A gets one *virtual* field: its name minus a leading verb
   (`get_user_id` -> `user id`), its description, type unknown; its matches count
   `VIRTUAL_DISCOUNT` times.
2. *Lexical similarity* of a field f and a parameter p: 1.0 when their names are the same after
   tokenising (snake/camel/kebab split, lower-case, stop words out, a plural `s` stripped), else
   `max(J, C)` where J is the Jaccard index of the name tokens and C the cosine of the bags of
   name + description tokens.
3. *Type compatibility* `type_fit(f, p)` in [0, 1]: same type 1.0; integer -> number 1.0;
   number -> integer 0.7; an array's element into a scalar, or a scalar into an array of it,
   `ARRAY_STEP` times the element fit; a scalar into a string 0.6; a string into a number 0.4;
   an unflattened object 0.3; unknown type on either side 0.5; anything else 0.
4. `supply(A, p) = max_f type_fit(f, p) * lexical(f, p)` (times the virtual discount).
5. The task (the user's request) can state most values; opaque identifiers (names with id, uuid,
   token, handle, cursor, session, ...) rarely: `task_supply(p)` is `TASK_ID_SUPPLY` for those,
   1.0 otherwise.
6. `coverage(A, B)` = mean over B's required parameters of `max(supply(A, p), task_supply(p))`
   (1.0 without required parameters): can every required input be filled?
   `feed(A, B)` = max over B's parameters of `supply(A, p)` (optional ones times
   `OPTIONAL_WEIGHT`): does A actually contribute something?
7. `compat(A, B) = feed * coverage`; 0 when B takes no parameters (nothing can flow into it:
   such dependencies are about state, e.g. `cd -> ls`, and only the LLM proposes them).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from data_synth.traj.records import ToolDoc

VIRTUAL_DISCOUNT = 0.7
ARRAY_STEP = 0.8
TASK_ID_SUPPLY = 0.4
OPTIONAL_WEIGHT = 0.7

_STOP = frozenset(
    "a an the of to for in on at by with from and or is are be this that it its as which will can "
    "should must if any all you your we our their there these those not no into via per each only "
    "one use used using when where what who how than then also may e g i eg".split()
)
_VERBS = frozenset(
    "get list fetch retrieve search find query read create add make update set delete remove "
    "post put check display show view lookup look compute calculate".split()
)
_ID_TOKENS = frozenset("id ids uuid guid token handle cursor session".split())


def tokens(text: str) -> list[str]:
    """Lower-case word tokens: snake/kebab/camel split, stop words out, plural `s` stripped."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text or "")
    out = []
    for w in re.findall(r"[A-Za-z0-9]+", text.lower()):
        if w in _STOP:
            continue
        if len(w) > 3 and w.endswith("ies"):
            w = w[:-3] + "y"
        elif len(w) >= 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
            w = w[:-1]
        out.append(w)
    return out


@dataclass(frozen=True)
class Slot:
    """An output field of a tool or an input parameter."""

    name: str
    path: str
    type: str | None
    item_type: str | None
    description: str
    virtual: bool = False
    required: bool = False

    @property
    def name_tokens(self) -> frozenset[str]:
        return frozenset(tokens(self.name))


def _type_of(schema: Any) -> tuple[str | None, str | None]:
    if not isinstance(schema, dict):
        return None, None
    t = schema.get("type")
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), None)
    item = None
    if t == "array" and isinstance(schema.get("items"), dict):
        item, _ = _type_of(schema["items"])
    return t, item


def _flatten(schema: dict[str, Any], prefix: str, out: list[Slot]) -> None:
    for name, sub in (schema.get("properties") or {}).items():
        if not isinstance(sub, dict):
            continue
        t, item = _type_of(sub)
        path = f"{prefix}{name}"
        out.append(Slot(name, path, t, item, str(sub.get("description", ""))))
        if t == "object":
            _flatten(sub, path + ".", out)
        elif t == "array" and isinstance(sub.get("items"), dict) and sub["items"].get("type") == "object":
            _flatten(sub["items"], path + "[].", out)


def output_slots(tool: ToolDoc) -> list[Slot]:
    """A's fields (rule 1)."""
    slots: list[Slot] = []
    if tool.output:
        _flatten(tool.output, "", slots)
        if not slots:  # a documented scalar or a property-less object
            t, item = _type_of(tool.output)
            slots.append(Slot("result", "result", t, item, str(tool.output.get("description", ""))))
        return slots
    words = tool.name.replace("-", "_").split("_")
    while len(words) > 1 and words[0].lower() in _VERBS:
        words = words[1:]
    return [Slot(" ".join(words), "(return value)", None, None, tool.description, virtual=True)]


def input_slots(tool: ToolDoc) -> list[Slot]:
    required = set(tool.parameters.get("required") or [])
    slots = []
    for name, sub in (tool.parameters.get("properties") or {}).items():
        t, item = _type_of(sub)
        desc = str(sub.get("description", "")) if isinstance(sub, dict) else ""
        slots.append(Slot(name, name, t, item, desc, required=name in required))
    return slots


def _scalar_fit(a: str | None, b: str | None) -> float:
    if a is None or b is None:
        return 0.5
    if a == b or (a, b) == ("integer", "number"):
        return 1.0
    if (a, b) == ("number", "integer"):
        return 0.7
    if b == "string" and a in ("integer", "number", "boolean"):
        return 0.6
    if a == "string" and b in ("integer", "number"):
        return 0.4
    if "object" in (a, b):
        return 0.3
    return 0.0


def type_fit(f: Slot, p: Slot) -> float:
    """Rule 3."""
    if f.type == "array" and p.type != "array":
        return ARRAY_STEP * _scalar_fit(f.item_type, p.type)
    if p.type == "array" and f.type != "array":
        return ARRAY_STEP * _scalar_fit(f.type, p.item_type)
    if f.type == "array" and p.type == "array":
        return _scalar_fit(f.item_type, p.item_type) if f.item_type and p.item_type else 0.8
    return _scalar_fit(f.type, p.type)


def _cosine(a: Counter, b: Counter) -> float:
    if not a or not b:
        return 0.0
    dot = sum(v * b[k] for k, v in a.items() if k in b)
    return dot / math.sqrt(sum(v * v for v in a.values()) * sum(v * v for v in b.values()))


def lexical(f: Slot, p: Slot) -> float:
    """Rule 2."""
    fn, pn = f.name_tokens, p.name_tokens
    if fn and fn == pn:
        return 1.0
    jaccard = len(fn & pn) / len(fn | pn) if fn | pn else 0.0
    bag_f = Counter(tokens(f.name) + tokens(f.description))
    bag_p = Counter(tokens(p.name) + tokens(p.description))
    return max(jaccard, _cosine(bag_f, bag_p))


def task_supply(p: Slot) -> float:
    """Rule 5."""
    return TASK_ID_SUPPLY if p.name_tokens & _ID_TOKENS else 1.0


@dataclass(frozen=True)
class Match:
    field: str
    param: str
    score: float


@dataclass(frozen=True)
class Compat:
    score: float
    feed: float
    coverage: float
    matches: tuple[Match, ...]  # the best field for each parameter A can feed (score > 0)

    def evidence(self, k: int = 3) -> list[str]:
        return [f"{m.field}->{m.param}:{m.score:.2f}" for m in sorted(self.matches, key=lambda m: -m.score)[:k]]


def supply(fields: list[Slot], p: Slot) -> tuple[float, str]:
    """Rule 4: the best field of A for p and its score."""
    best, where = 0.0, ""
    for f in fields:
        s = type_fit(f, p) * lexical(f, p) * (VIRTUAL_DISCOUNT if f.virtual else 1.0)
        if s > best:
            best, where = s, f.path
    return best, where


def compat(a: ToolDoc, b: ToolDoc) -> Compat:
    """Rules 6 and 7 for the pair (a, b)."""
    params = input_slots(b)
    if not params:
        return Compat(0.0, 0.0, 1.0, ())
    fields = output_slots(a)
    feed, cover, matches = 0.0, [], []
    for p in params:
        s, where = supply(fields, p)
        if s > 0:
            matches.append(Match(where, p.name, round(s, 4)))
        feed = max(feed, s if p.required else OPTIONAL_WEIGHT * s)
        if p.required:
            cover.append(max(s, task_supply(p)))
    coverage = sum(cover) / len(cover) if cover else 1.0
    return Compat(round(feed * coverage, 4), round(feed, 4), round(coverage, 4), tuple(matches))
