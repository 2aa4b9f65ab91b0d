"""Golden calls of an ASTRA-RL-1k row, recovered by running candidate calls in the sandbox.

A row (`prompt`, `tool_schema`, `tool_dict`, `sub_qa_dict`) says which answers each tool's calls
must produce but not the calls. Our reward needs the calls: a call solves a sub-question only when
it asks what the golden call asks (`env_registry.matching.args_agree` on the identifying
parameters). This module searches for them, LLM-free first (docs/astra-rl-1k.md has the story):

Candidates. Each parameter gets values typed by its schema: enum members (only those, when it
has an enum); for free strings and numbers, the values the task states (quoted strings, runs of
capitalised words and their spans, id-like tokens, numbers, dates, JSON leaves of a background),
the schema's default and examples, and, from the second round on, what accepted calls returned
(their answers first, then the other leaves of their outputs: a country read off a city's
profile). Booleans get both values; a list parameter one entity at a time, or subsets of the
accepted numeric answers for a list of numbers. The required parameters are combined first with
the optional ones left out (the tool's defaults); only a tool none of whose answers such a call
finds is tried again with its optional enum and boolean modifiers set. Combinations are ranked by
where their values come from (`_TIER`) and tried best first. A proposer (a model,
`env_registry.recovery_llm`) is asked only for answers nothing LLM-free produced; its calls are
candidates like the others.

Acceptance (why a wrong-entity call cannot get in). For each target answer, every candidate
whose output contains it (outside the echoes of its own arguments, `answer_in_output`) is a hit.
An answer is recovered only when
  1. its hits agree: they have the same argument values up to order (an origin/destination
     pair either way round) or byte-identical outputs; two different entities whose outputs both
     hold the answer make the answer *ambiguous*, and it is left unrecovered, never guessed
     (hits that disagree are narrowed once to those whose enum values the task names);
  2. every free identifying value (not an enum member or a boolean) of the accepted call comes
     from the task text, an accepted call's output or a model's proposal (a schema example or
     default alone identifies nothing: it is a decoy that only widens the uniqueness test);
  3. the call, replayed alone in two fresh sessions, produces the answer both times with the
     same output (random ids and clocks fail here, as the determinism rule would fail them);
  4. after the last round it is still the only call producing the answer among every candidate
     the search ended with, less the outputs its own call led to (`_Search.recheck`).
So a wrong entity is accepted only if the right one is not among the candidates at all while
the wrong one's output holds the answer: the candidate pool holds every entity the text names
and every value an accepted output returned, and the benchmark (`bench/recovery.py`) measures
what slips through on worlds whose golden calls are known.

The search is bounded (`Budget`: new calls per tool and round, seconds per row, rounds, model
proposals); when a bound stops it the row says which (`RowRecovery.gave_up`), and every
unrecovered answer says why (no hit, ambiguous, not reproducible). Every recovered call records
how it was found (`Recovered.found_by`: where each argument value came from).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from astra_foundation.sandbox import Module, Program
from env_registry.arguments import argument_validator
from env_registry.matching import answer_in_output, answer_number
from env_registry.spec import tool_module

__all__ = ["Budget", "Proposer", "Recovered", "RowRecovery", "RowTools", "recover_row", "text_values"]

# Sources of a value, in the order the search tries them.
ANSWER, TEXT, OUTPUT = "answer", "text", "output"
ENUM, BOOLEAN, DEFAULT, EXAMPLE, LLM = "enum", "boolean", "default", "example", "llm"
# A free identifying value must come from one of these: the task, an accepted call, or a model's
# proposal (a spelling the text does not state: "Harbour Pt." for "Harbour Point"), which still
# has to be the one call that produces the answer.
_IDENTIFYING_SOURCES = (ANSWER, TEXT, OUTPUT, LLM)
_FROM_CALL = (ANSWER, OUTPUT)  # values an accepted call returned: its answer, or another leaf of its output
# The order values are tried in: an accepted call's answer is what a dependent call most often
# takes (ASTRA's sub-questions pass answers on), then what the task states, then the rest of an
# output; schema defaults and examples last (decoys: they only widen the uniqueness test).
_TIER = {ANSWER: 0, TEXT: 1, ENUM: 1, BOOLEAN: 1, OUTPUT: 2, LLM: 2, DEFAULT: 3, EXAMPLE: 3}
_MAX_COMBOS = 20_000  # combinations ranked per tool and round (each parameter's best values kept)
_MAX_OPERANDS = 6  # accepted numeric answers combined into operand lists (every subset of >= 2)

_QUOTED = re.compile(r"'([^'\n]{1,80})'|\"([^\"\n]{1,80})\"")
_CONNECTORS = r"(?:of|de|la|del|da|van|von|and|the|on|upon)"
# A run of capitalised words, joined by connectors, with model numbers inside ("Gami Pro 7").
_CAPITALISED = re.compile(rf"[A-Z][\w\-]*(?:[ ](?:{_CONNECTORS}[ ])?(?:[A-Z][\w\-]*|\d[\w\-]*))*")
_ID_LIKE = re.compile(r"\b[A-Za-z_\-]*\d[\w\-]*\b")
_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w])|(?<![\w.])-?\d+(?:\.\d+)?(?![\w])")
_MAX_TEXT_VALUE = 80
# Capitalised because they open a sentence, not because they name something.
_SENTENCE_WORDS = frozenset(
    "what which who whom whose where when how why is are was were do does did can could would should will "
    "please tell find give show list first then next finally and or but if in on at for from to of by with "
    "the a an i my me we our you your it its this that these those there here".split()
)


@dataclass(frozen=True)
class Budget:
    """Bounds of the search of one row."""

    calls_per_tool: int = 1000
    seconds_per_row: float = 60.0
    rounds: int = 4  # dependency depth: a value must come from the text or an output accepted within this many rounds
    equivalent: int = 4  # most interchangeable calls (same entities in another order) kept for one answer
    proposals: int = 5  # calls taken from a model per unrecovered answer (with a proposer)


@dataclass(frozen=True)
class Value:
    value: Any
    source: str  # ANSWER, TEXT, OUTPUT, ENUM, ...
    of: str = ""  # for ANSWER and OUTPUT: the id of the recovered answer (`tool#k`) whose call returned it

    @property
    def tier(self) -> int:
        return _TIER[self.source]


@dataclass
class Recovered:
    """One target answer's recovered golden call (and interchangeable ones, `alternatives`)."""

    tool: str
    index: int  # the answer's position in the row's `sub_qa_dict[tool]`
    answer: str
    args: dict[str, Any]
    found_by: dict[str, str]  # parameter -> where its value came from ("text", "output of t#0", "enum", ...)
    depends_on: list[str]  # ids (`tool#k`) of the answers whose outputs gave argument values
    output: str
    alternatives: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return f"{self.tool}#{self.index}"


# (row, tool, answer, calls accepted so far) -> argument objects a model proposes for the answer.
Proposer = Callable[["RowTools", str, str, list["Recovered"]], Awaitable[list[dict[str, Any]]]]


@dataclass
class RowRecovery:
    recovered: list[Recovered]
    missing: dict[str, str]  # answer id -> why it was not recovered
    calls_run: int
    seconds: float
    gave_up: str | None = None  # why the search stopped before trying everything it could

    @property
    def complete(self) -> bool:
        return not self.missing


@dataclass(frozen=True)
class RowTools:
    """What recovery needs of a row: the task text, the tools and the targets."""

    text: str
    schemas: dict[str, dict[str, Any]]  # tool -> parameters schema
    sources: dict[str, str]  # tool -> code
    targets: dict[str, list[str]]  # tool -> answers

    def program_id(self) -> str:
        body = json.dumps([self.sources, self.schemas], sort_keys=True, ensure_ascii=False)
        return "rl" + hashlib.sha256(body.encode()).hexdigest()[:30]


# -- values from text and outputs -------------------------------------------------------------


def _number(literal: str) -> int | float:
    literal = literal.replace(",", "")
    return float(literal) if "." in literal else int(literal)


def _json_leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _json_leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _json_leaves(v)
    elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
        yield value


def _embedded_json(text: str) -> Iterator[Any]:
    for start in (m.start() for m in re.finditer(r"[{\[]", text)):
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            continue
        yield from _json_leaves(value)


def text_values(text: str) -> list[Any]:
    """Candidate argument values a text states, most specific first, without repeats: JSON
    leaves, quoted strings, capitalised runs and their words, id-like tokens, numbers."""
    found: list[Any] = list(_embedded_json(text))
    found += [a or b for a, b in _QUOTED.findall(text)]
    runs = [m.group(0).rstrip(".-").removesuffix("'s") for m in _CAPITALISED.finditer(text)]
    spans = [_spans(run) for run in runs]
    found += [s[0] for s in spans if s]  # each run's longest name first: the likeliest whole entity
    found += [r for r in runs if len(r) > 1 and r.casefold() not in _SENTENCE_WORDS]
    found += [x for s in spans for x in s[1:]]
    found += _ID_LIKE.findall(text)
    found += [_number(n) for n in _NUMBER.findall(text)]
    return _unique(v.strip() if isinstance(v, str) else v for v in found)


def _spans(run: str) -> list[str]:
    """The contiguous spans of capitalised words in a run ("Which of Nelna Naszousberg" gives
    "Nelna Naszousberg", "Nelna", ...): a sentence's first word or a connector is no part of a name."""
    out = []
    for segment in re.split(rf"\s+{_CONNECTORS}\s+", run):
        words = [w.removesuffix("'s") for w in segment.split()]
        while words and words[0].casefold() in _SENTENCE_WORDS:
            words = words[1:]
        spans = [" ".join(words[i:j]) for i in range(len(words)) for j in range(len(words), i, -1)]
        out += [x for x in spans if len(x) > 1 and x.casefold() not in _SENTENCE_WORDS]
    return sorted(out, key=lambda x: -len(x.split()))  # longest first: whole names before their parts


def _key(v: Any) -> tuple[str, str]:
    return (type(v).__name__ if not isinstance(v, (int, float)) else "n", str(v))


def answer_values(answer: str) -> list[Any]:
    """What a dependent call may take from an accepted answer: the answer, its number, the values it states."""
    number = answer_number(answer)
    whole = [] if number is None else [int(number) if number.is_integer else float(number)]
    return _unique([answer.strip(), *whole, *text_values(answer)])


def _unique(values: Any) -> list[Any]:
    seen, out = set(), []
    for v in values:
        key = _key(v)
        if v == "" or (isinstance(v, str) and len(v) > _MAX_TEXT_VALUE) or key in seen:
            continue
        seen.add(key)
        out.append(v)
    return out


def output_values(output: str) -> list[Any]:
    """Candidate values an accepted call's output returns: its JSON leaves, else what its text states."""
    try:
        return _unique(_json_leaves(json.loads(output)))
    except ValueError:
        return text_values(output)


# -- candidate calls -----------------------------------------------------------------------------


def _typed(prop: dict[str, Any], pool: list[Value]) -> list[Value]:
    """The pool's values a parameter of schema `prop` can take, in pool order."""
    kind = prop.get("type")
    out = []
    for v in pool:
        x = v.value
        if kind == "string" and isinstance(x, str):
            out.append(v)
        elif kind == "string" and isinstance(x, int) and v.source in _FROM_CALL:
            out.append(Value(str(x), v.source, v.of))  # an id a previous tool returned as a number
        elif kind == "integer" and isinstance(x, (int, float)) and float(x).is_integer():
            out.append(Value(int(x), v.source, v.of))
        elif kind == "number" and isinstance(x, (int, float)):
            out.append(v)
    return out


def parameter_values(prop: dict[str, Any], pool: list[Value]) -> list[Value]:
    """Every value tried for one parameter (see the module docstring)."""
    items = prop.get("items")
    if prop.get("type") == "array" and isinstance(items, dict):
        if items.get("type") in ("number", "integer"):
            return _operands(items, pool)
        # One item: the entity a sub-question asks about. The reward lets a call's list hold more
        # (`CallKey.includes`), so a batch call over every compared entity still agrees with it.
        return [Value([v.value], v.source, v.of) for v in parameter_values(items, pool)]
    if isinstance(prop.get("enum"), list):
        return [Value(x, ENUM) for x in prop["enum"]]
    if prop.get("type") == "boolean":
        return [Value(True, BOOLEAN), Value(False, BOOLEAN)]
    schema = [Value(prop["default"], DEFAULT)] if "default" in prop else []
    schema += [Value(x, EXAMPLE) for x in prop.get("examples") or []]
    described = _QUOTED.findall(str(prop.get("description") or ""))
    schema += [Value(a or b, EXAMPLE) for a, b in described]
    seen, out = set(), []
    # Best tier first; a value the task states keeps that source even if the schema has it too.
    for v in sorted(_typed(prop, [*pool, *schema]), key=lambda v: v.tier):
        key = (type(v.value).__name__, str(v.value))
        if key not in seen:
            seen.add(key)
            out.append(v)
    return out


def _operands(items: dict[str, Any], pool: list[Value]) -> list[Value]:
    """Lists of numbers for an aggregate (a sum, a mean): every subset of at least two of the
    accepted numeric answers, in the order they were found, then each number alone."""
    answers = [v for v in _typed(items, pool) if v.source == ANSWER][:_MAX_OPERANDS]
    subsets = [
        Value([v.value for v in combo], ANSWER, ",".join(v.of for v in combo))
        for size in range(len(answers), 1, -1)
        for combo in itertools.combinations(answers, size)
    ]
    singles = [Value([v.value], v.source, v.of) for v in sorted(_typed(items, pool), key=lambda v: v.tier)]
    return subsets + singles


def _modifier(prop: dict[str, Any]) -> bool:
    return isinstance(prop.get("enum"), list) or prop.get("type") == "boolean"


def candidate_calls(parameters: dict[str, Any], pool: list[Value], modifiers: bool) -> Iterator[dict[str, Value]]:
    """Argument combinations: every required parameter set, then (with `modifiers`) every
    optional enum/boolean parameter as well; none when a required parameter has no value."""
    props = parameters.get("properties") or {}
    names = [p for p in props if p in set(parameters.get("required") or [])]
    if modifiers:
        names += [p for p in props if p not in names and _modifier(props[p])]
    choices = [parameter_values(props[p], pool) for p in names]
    if not names or any(not c for c in choices):
        return
    while math.prod(len(c) for c in choices) > _MAX_COMBOS:  # keep each parameter's best values
        longest = max(range(len(choices)), key=lambda i: len(choices[i]))
        choices[longest] = choices[longest][: max(1, len(choices[longest]) * 3 // 4)]
    ranked = sorted(
        itertools.product(*(list(enumerate(c)) for c in choices)),
        key=lambda combo: (sum(v.tier for _, v in combo), sum(i for i, _ in combo)),
    )
    for combo in ranked:
        yield dict(zip(names, (v for _, v in combo), strict=True))


# -- acceptance -----------------------------------------------------------------------------------


@dataclass
class _Hit:
    args: dict[str, Value]
    output: str

    def plain(self) -> dict[str, Any]:
        return {k: v.value for k, v in self.args.items()}

    def identity(self) -> tuple[str, ...]:
        return _identity(self.plain())


def _identity(args: dict[str, Any]) -> tuple[str, ...]:
    """A call's argument values regardless of which parameter holds which (an origin/destination
    pair either way round asks about the same two places)."""
    return tuple(sorted(json.dumps(v, sort_keys=True, default=str) for v in args.values()))


def _agreeing(hits: list[_Hit]) -> bool:
    return all(h.identity() == hits[0].identity() or h.output == hits[0].output for h in hits)


def _named(hit: _Hit, text: str) -> bool:
    """Every enum value of the call is one the task text names ("in June" -> "june")."""
    return all(
        v.source != ENUM or not isinstance(v.value, str) or re.search(rf"\b{re.escape(v.value)}\b", text, re.I)
        for v in hit.args.values()
    )


def _decide(hits: list[_Hit], budget: Budget, text: str = "") -> tuple[_Hit | None, list[_Hit], str]:
    """The accepted hit and its interchangeable ones, or None and why (see the module docstring).
    Hits that disagree are narrowed once to those whose enum values the task names (a month,
    a unit, a metric the question states): the task asks about that one, not about another
    month whose number happens to be the same."""
    if not hits:
        return None, [], "no candidate call's output contains it"
    if not _agreeing(hits):
        named = [h for h in hits if _named(h, text)]
        hits = named if named and _agreeing(named) else hits
    first = hits[0]
    same = _agreeing(hits)
    if not same or len(hits) > budget.equivalent:
        shown = "; ".join(json.dumps(h.plain(), ensure_ascii=False) for h in hits[:3])
        return None, [], f"ambiguous: {len(hits)} calls with different arguments produce it ({shown})"
    for hit in hits:
        unsourced = [k for k, v in hit.args.items() if v.source not in (*_IDENTIFYING_SOURCES, ENUM, BOOLEAN)]
        if unsourced:
            return None, [], f"its only calls take {unsourced} from the schema, not from the task or an output"
    return first, hits[1:], ""


# -- the search ---------------------------------------------------------------------------------


class _Runner:
    """Runs calls of one row's tools: candidate calls in one session, checks in fresh ones."""

    def __init__(self, row: RowTools, sandbox: Any):
        self.row, self.sandbox = row, sandbox
        env = row.program_id()
        self.module = {t: tool_module(t, env) for t in row.sources}
        self.program = Program(tuple(Module(name=self.module[t], source=s) for t, s in row.sources.items()))
        self.session: Any = None
        self.calls = 0
        self.cache: dict[str, Any] = {}

    @staticmethod
    def _key(tool: str, args: dict[str, Any]) -> str:
        return json.dumps([tool, args], sort_keys=True, default=str)

    def cached(self, tool: str, args: dict[str, Any]) -> bool:
        return self._key(tool, args) in self.cache

    async def call(self, tool: str, args: dict[str, Any]) -> Any:
        key = self._key(tool, args)
        if key not in self.cache:
            if self.session is None:
                self.session = await self.sandbox.open_session(self.program)
            self.calls += 1
            self.cache[key] = await self.sandbox.call(self.session, self.module[tool], tool, args)
        return self.cache[key]

    async def fresh(self, tool: str, args: dict[str, Any]) -> Any:
        session = await self.sandbox.open_session(self.program)
        try:
            self.calls += 1
            return await self.sandbox.call(session, self.module[tool], tool, args)
        finally:
            await self.sandbox.close_session(session)

    async def close(self) -> None:
        if self.session is not None:
            await self.sandbox.close_session(self.session)
            self.session = None


@dataclass
class _Search:
    row: RowTools
    runner: _Runner
    budget: Budget
    deadline: float
    pool: list[Value]
    recovered: dict[str, Recovered] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    final: set[str] = field(default_factory=set)  # answers decided for good (ambiguous, not reproducible)
    tried: dict[str, int] = field(default_factory=dict)  # new calls run per tool this round
    modifiers: dict[str, bool] = field(default_factory=dict)  # whether a tool's last search set its modifiers
    proposed: dict[str, list[dict[str, Value]]] = field(default_factory=dict)  # a model's calls, per tool
    gave_up: str | None = None

    def open_targets(self, tool: str) -> list[tuple[int, str]]:
        return [
            (k, a)
            for k, a in enumerate(self.row.targets.get(tool, []))
            if f"{tool}#{k}" not in self.recovered and f"{tool}#{k}" not in self.final
        ]

    async def hits_of(
        self, tool: str, modifiers: bool, pool: list[Value] | None = None
    ) -> list[tuple[dict[str, Value], Any]]:
        """(arguments, result) of the tool's candidate calls under the pool (default: the current
        one), run within budget."""
        validator = argument_validator(self.row.schemas[tool])
        results = []
        for combo in candidate_calls(self.row.schemas[tool], self.pool if pool is None else pool, modifiers):
            args = {k: v.value for k, v in combo.items()}
            if not validator.is_valid(args):
                continue
            cached = self.runner.cached(tool, args)
            if not cached and (
                self.tried.get(tool, 0) >= self.budget.calls_per_tool or time.monotonic() > self.deadline
            ):
                self.gave_up = self.gave_up or (
                    f"search bounded: {self.budget.calls_per_tool} calls per tool and round, "
                    f"{self.budget.seconds_per_row:g} s per row"
                )
                break
            before = self.runner.calls
            res = await self.runner.call(tool, args)
            self.tried[tool] = self.tried.get(tool, 0) + (self.runner.calls - before)
            results.append((combo, res))
        for combo in self.proposed.get(tool, []):  # a model's calls stay candidates (for the recheck too)
            results.append((combo, await self.runner.call(tool, {k: v.value for k, v in combo.items()})))
        return results

    async def search_tool(self, tool: str) -> bool:
        """One round for one tool; True when it recovered something (new values for the pool)."""
        results = await self.hits_of(tool, modifiers=False)
        targets = self.open_targets(tool)
        found = {k: self._hits(a, results) for k, a in targets}
        modifiers = bool(targets) and not any(found.values())
        if modifiers:
            results = await self.hits_of(tool, modifiers=True)
            found = {k: self._hits(a, results) for k, a in targets}
        self.modifiers[tool] = modifiers
        progress = False
        for k, answer in targets:
            hit, others, why = _decide(found[k], self.budget, self.row.text)
            if hit is None:
                self.missing[f"{tool}#{k}"] = why
                if why.startswith("ambiguous"):
                    self.final.add(f"{tool}#{k}")
                continue
            progress |= await self._accept(tool, k, answer, hit, others)
        return progress

    async def recheck(self) -> None:
        """Each accepted answer once more against the final pool: a value a later output added may
        make another call produce it too; the answer (and every answer whose call used its
        output) is then dropped as ambiguous."""
        for aid, r in list(self.recovered.items()):
            if aid not in self.recovered:
                continue  # dropped with an answer it depended on
            later = self._descendants(aid)
            pool = [v for v in self.pool if v.of not in later]
            results = await self.hits_of(r.tool, self.modifiers.get(r.tool, False), pool)
            hit, _, why = _decide(self._hits(r.answer, results), self.budget, self.row.text)
            if hit is None or _identity(hit.plain()) != _identity(r.args):
                self._drop(aid, f"ambiguous once later outputs joined the candidates: {why or hit.plain()}")

    def _descendants(self, aid: str) -> set[str]:
        """`aid` and every recovered answer whose call used its output, directly or not."""
        out, grew = {aid}, True
        while grew:
            more = {o for o, r in self.recovered.items() if o not in out and out & set(r.depends_on)}
            out |= more
            grew = bool(more)
        return out

    def _drop(self, aid: str, why: str) -> None:
        self.recovered.pop(aid, None)
        self.missing[aid] = why
        for other, r in list(self.recovered.items()):
            if aid in r.depends_on:
                self._drop(other, f"its call used the output of {aid}, which was dropped")

    async def propose_missing(self, propose: Proposer) -> bool:
        """Ask the proposer for calls of each answer no candidate produced; its calls join the
        LLM-free candidates and the same acceptance decides (the sandbox, not the model)."""
        progress = False
        for tool in self.row.targets:
            validator = argument_validator(self.row.schemas.get(tool) or {})
            for k, answer in self.open_targets(tool):
                if not self.missing.get(f"{tool}#{k}", "").startswith("no candidate") or tool not in self.row.sources:
                    continue
                calls = (await propose(self.row, tool, answer, list(self.recovered.values())))[: self.budget.proposals]
                valid = [c for c in calls if isinstance(c, dict) and validator.is_valid(c)]
                self.proposed.setdefault(tool, []).extend({p: self._sourced(v) for p, v in c.items()} for c in valid)
                results = await self.hits_of(tool, self.modifiers.get(tool, False))
                hit, others, why = _decide(self._hits(answer, results), self.budget, self.row.text)
                if hit is None:
                    self.missing[f"{tool}#{k}"] = f"{why} (with {len(calls)} calls a model proposed)"
                    continue
                progress |= await self._accept(tool, k, answer, hit, others)
        return progress

    def _sourced(self, value: Any) -> Value:
        """A proposed value with the source it has in the pool (the text, an output), else `llm`."""
        found = next((v for v in self.pool if v.value == value and type(v.value) is type(value)), None)
        return found or Value(value, LLM)

    @staticmethod
    def _hits(answer: str, results: list[tuple[dict[str, Value], Any]]) -> list[_Hit]:
        out = []
        for combo, res in results:
            args = {k: v.value for k, v in combo.items()}
            if res.ok and answer_in_output(answer, res.text, args):
                out.append(_Hit(combo, res.text))
        return out

    async def _accept(self, tool: str, k: int, answer: str, hit: _Hit, others: list[_Hit]) -> bool:
        aid = f"{tool}#{k}"
        args = hit.plain()
        checks = [await self.runner.fresh(tool, args) for _ in range(2)]
        if not all(c.ok and answer_in_output(answer, c.text, args) for c in checks) or checks[0].text != checks[1].text:
            self.missing[aid] = "not reproducible: the call's output differs or misses the answer in a fresh session"
            self.final.add(aid)
            return False
        self.missing.pop(aid, None)
        found_by = {p: (f"{v.source} of {v.of}" if v.source in _FROM_CALL else v.source) for p, v in hit.args.items()}
        depends = sorted({d for v in hit.args.values() if v.source in _FROM_CALL for d in v.of.split(",")})
        self.recovered[aid] = Recovered(
            tool, k, answer, args, found_by, depends, hit.output, [o.plain() for o in others]
        )
        self._learn(aid, answer, hit.output)
        return True

    def _learn(self, aid: str, answer: str, output: str) -> None:
        """An accepted call's answer and its output's other leaves join the pool (a value the task
        states keeps that source: the call did not supply it)."""
        sources = {}
        for v in self.pool:
            sources.setdefault(_key(v.value), set()).add(v.source)
        for x in answer_values(answer):
            if not sources.get(_key(x), set()) & {TEXT, ANSWER}:
                self.pool.append(Value(x, ANSWER, aid))
                sources.setdefault(_key(x), set()).add(ANSWER)
        for x in output_values(output):
            if _key(x) not in sources:
                self.pool.append(Value(x, OUTPUT, aid))
                sources[_key(x)] = {OUTPUT}


async def recover_row(
    row: RowTools, sandbox: Any, budget: Budget = Budget(), propose: Proposer | None = None
) -> RowRecovery:
    """Recover the golden call of every target answer of `row` that the search can pin down
    (see the module docstring); `sandbox` implements `astra_foundation.sandbox.protocol.Sandbox`.
    `propose` (a model, `env_registry.recovery_llm`) is asked only for answers no LLM-free
    candidate produced."""
    t0 = time.monotonic()
    runner = _Runner(row, sandbox)
    search = _Search(row, runner, budget, t0 + budget.seconds_per_row, [Value(v, TEXT) for v in text_values(row.text)])
    for tool, answers in row.targets.items():
        for k in range(len(answers)):
            search.missing[f"{tool}#{k}"] = "its tool is not in the row" if tool not in row.sources else "not searched"
    try:
        for _ in range(budget.rounds):
            progress = False
            search.tried.clear()
            for tool in row.targets:
                if tool in row.sources and tool in row.schemas and search.open_targets(tool):
                    progress |= await search.search_tool(tool)
            if propose is not None and not progress and time.monotonic() <= search.deadline:
                progress = await search.propose_missing(propose)
            if not progress or time.monotonic() > search.deadline:
                break
        await search.recheck()
    finally:
        await runner.close()
    recovered = sorted(search.recovered.values(), key=lambda r: (list(row.targets).index(r.tool), r.index))
    missing = {a: why for a, why in search.missing.items() if a not in search.recovered}
    return RowRecovery(recovered, missing, runner.calls, time.monotonic() - t0, search.gave_up)
