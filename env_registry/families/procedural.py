"""The procedural family: seeded, LLM-free environments (the embedded default).

Each environment gets its own invented world (`_world.build_world`): countries, cities,
companies, people, products, events, road distances and exchange rates. A task is a walk over
the world's relations ("the maker of the Zentra X2" -> "its headquarters city" -> "that
city's country") ending in a measured attribute, optionally transformed (unit conversion,
currency conversion, weekday, age) or joined with a second branch (distance, percentage
change, density, statistics, durations). Every step is one sub-question answered by one tool
call; the tools are rendered as Python source with the world's data inside (`_tools`).

Answers are derived from the world model, not by running the tool code: integers and dates
exactly, decimals with sympy rationals, rounded half-up, with rounding ties rejected (a
float-based tool could round a tie either way). The tool sources compute the same values
independently; `python -m env_registry validate` (golden-call replay in the sandbox) and the
tests check that both agree.

Determinism: environment i of seed s is drawn from `Random("procedural/v1/{s}/{i}/{attempt}")`,
so `generate(n, s)` is a prefix of `generate(n + k, s)` and independent of the machine.

Domains: geography, finance, people, retail, climate, events. Scenario types: all four (see
`env_registry.shape`); hops (longest tool chain) from 1 to `max_hops`.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import sympy

from env_registry.families._tools import LENGTH_UNITS, MASS_UNITS, ToolKind, make_kind
from env_registry.families._world import FISCAL_YEARS, MONTHS, World, build_world
from env_registry.shape import classify
from env_registry.spec import (
    AnswerRule,
    EnvSpec,
    GoldenCall,
    Provenance,
    ScenarioType,
    SubQuestion,
    ToolSpec,
)

GENERATOR = "procedural"
FAMILY_VERSION = "v1"
DOMAINS = ("geography", "finance", "people", "retail", "climate", "events")
SCENARIO_TYPES = tuple(ScenarioType)
_ATTEMPTS = 200


class _Retry(Exception):
    """This draw cannot make the requested task (dead-end walk, tie, equal values): draw again."""


# -- values ------------------------------------------------------------------------------

Value = int | Decimal | dt.date | str


def _q(v: int | Decimal) -> sympy.Rational:
    return sympy.Rational(str(v))


def _round(x: sympy.Rational, places: int) -> Decimal:
    """Round half-up; refuse values too close to a tie, where a float tool may round either way."""
    scaled = x * 10**places
    frac = scaled - sympy.floor(scaled)
    if abs(frac - sympy.Rational(1, 2)) < sympy.Rational(1, 10**6):
        raise _Retry("rounding tie")
    return Decimal(int(sympy.floor(scaled + sympy.Rational(1, 2)))).scaleb(-places)


def _fmt(v: Value) -> str:
    if isinstance(v, dt.date):
        return v.isoformat()
    return str(v)


def _rule(v: Value) -> AnswerRule:
    if isinstance(v, bool) or isinstance(v, str) or isinstance(v, dt.date):
        return AnswerRule(kind="text")
    if isinstance(v, int):
        return AnswerRule(kind="numeric", rel_tol=0, abs_tol=0)
    return AnswerRule(kind="numeric")


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


# -- the relation and attribute vocabulary ----------------------------------------------


@dataclass(frozen=True)
class Ent:
    etype: str  # city, country, company, person, product, event, ticker
    name: str

    @property
    def display(self) -> str:
        return f"the {self.name}" if self.etype in ("product", "event") else self.name


@dataclass(frozen=True)
class Rel:
    source: str
    key: str
    target: str
    kind: str  # tool kind answering it
    field: str  # record field (kind-specific args for list_cities)
    question: str  # concrete sub-question
    np: str  # noun phrase for nesting: "the maker of {x}"
    step: str  # imperative step: "find the company that makes {x}"
    ref: str  # how the next step refers to the result

    def resolve(self, w: World, ent: Ent) -> Ent:
        if self.key == "largest_city":
            cities = [c for c in w.cities.values() if c.country == ent.name]
            return Ent("city", max(cities, key=lambda c: c.population).name)
        src = w.tickers()[ent.name] if ent.etype == "ticker" else w.by_type(ent.etype)[ent.name]
        return Ent(self.target, getattr(src, self.field))


RELATIONS = [
    Rel("person", "employer", "company", "person", "employer", "Which company does {x} work for?",
        "the employer of {x}", "find the company {x} works for", "that company"),
    Rel("person", "home_city", "city", "person", "home_city", "In which city does {x} live?",
        "the home city of {x}", "find the city {x} lives in", "that city"),
    Rel("company", "hq_city", "city", "company", "hq_city", "In which city is {x} headquartered?",
        "the headquarters city of {x}", "find the city where {x} is headquartered", "that city"),
    Rel("company", "ceo", "person", "company", "ceo", "Who is the CEO of {x}?",
        "the CEO of {x}", "find the CEO of {x}", "that person"),
    Rel("company", "ticker", "ticker", "company", "ticker", "What is the stock ticker of {x}?",
        "the stock ticker of {x}", "find the stock ticker of {x}", "that ticker"),
    Rel("product", "maker", "company", "product", "maker", "Which company makes {x}?",
        "the maker of {x}", "find the company that makes {x}", "that company"),
    Rel("event", "city", "city", "event", "city", "In which city is {x} held?",
        "the host city of {x}", "find the city hosting {x}", "that city"),
    Rel("city", "country", "country", "city", "country", "Which country is {x} in?",
        "the country of {x}", "find the country {x} is in", "that country"),
    Rel("country", "capital", "city", "country", "capital", "What is the capital of {x}?",
        "the capital of {x}", "find the capital of {x}", "that city"),
    Rel("country", "largest_city", "city", "list_cities", "", "What is the most populous city of {x}?",
        "the most populous city of {x}", "find the most populous city of {x}", "that city"),
]  # fmt: skip
_RELS_FROM: dict[str, list[Rel]] = {}
for _r in RELATIONS:
    _RELS_FROM.setdefault(_r.source, []).append(_r)


@dataclass(frozen=True)
class Post:
    """A transformation of a measured value by one more tool call."""

    key: str
    main: str  # main question, {x} the entity phrase
    question: str  # concrete sub-question, {v} the value, {u} its unit
    unit: str  # unit of the result, for the final answer


@dataclass(frozen=True)
class Attr:
    etype: str
    key: str
    kind: str
    question: str  # {x} entity, {p} parameter phrase (month, year)
    np: str
    unit: str = ""
    cmp: tuple[str, str] | None = None  # (phrase for the max, phrase for the min)
    posts: tuple[Post, ...] = ()
    percent: bool = False  # "by what percentage is A's X greater than B's" makes sense
    stat: str | None = None  # statistic that makes sense across entities
    noun: str = ""  # short name for aggregate questions ("combined population of ...")
    climate: bool = False


_FT = Post("to_ft", "What is the elevation of {x} in feet?", "What is {v} metres in feet?", "ft")
_F = Post(
    "to_f",
    "What is the average {p} temperature in {x}, in degrees Fahrenheit?",
    "What is {v} °C in degrees Fahrenheit?",
    "°F",
)
_LB = Post("to_lb", "How much does {x} weigh in pounds?", "What is {v} kg in pounds?", "lb")
_USD_SHARE = Post("to_usd", "What is the share price of {x} in US dollars?", "What is {v} {u} in USD?", "USD")
_USD_PRICE = Post("to_usd", "What does {x} cost in US dollars?", "What is {v} {u} in USD?", "USD")
_WEEKDAY = Post("weekday", "On what day of the week does {x} start?", "What day of the week is {v}?", "")
_AGE = Post("age", "How old was {x} on {p}?", "How old is someone born on {v} on {p}?", "years")

ATTRS = [
    Attr("city", "population", "city", "What is the population of {x}?", "the population of {x}",
         cmp=("has the largest population", "has the smallest population"), percent=True, stat="sum",
         noun="population"),
    Attr("city", "founded_year", "city", "In what year was {x} founded?", "the founding year of {x}",
         cmp=("was founded most recently", "was founded earliest")),
    Attr("city", "elevation_m", "city", "What is the elevation of {x} in metres?", "the elevation of {x}",
         unit="m", cmp=("lies highest", "lies lowest"), posts=(_FT,), percent=True, stat="mean", noun="elevation"),
    Attr("city", "temp", "climate", "What is the average {p} temperature in {x}, in °C?",
         "the average {p} temperature in {x}", unit="°C", cmp=("is warmest in {p}", "is coldest in {p}"),
         posts=(_F,), stat="mean", noun="{p} temperature", climate=True),
    Attr("country", "population", "country", "What is the population of {x}?", "the population of {x}",
         cmp=("has the largest population", "has the smallest population"), percent=True, stat="sum",
         noun="population"),
    Attr("country", "area_km2", "country", "What is the land area of {x} in square kilometres?",
         "the land area of {x}", unit="km²", cmp=("has the largest land area", "has the smallest land area"),
         percent=True, stat="sum", noun="land area"),
    Attr("country", "official_language", "country", "What is the official language of {x}?",
         "the official language of {x}"),
    Attr("company", "founded_year", "company", "In what year was {x} founded?", "the founding year of {x}",
         cmp=("was founded most recently", "was founded earliest")),
    Attr("company", "employees", "company", "How many employees does {x} have?", "the headcount of {x}",
         cmp=("has the most employees", "has the fewest employees"), percent=True, stat="sum",
         noun="headcount"),
    Attr("company", "sector", "company", "In which business sector does {x} operate?", "the sector of {x}"),
    Attr("company", "revenue", "financials", "What was the revenue of {x} in fiscal year {p}, in millions?",
         "the fiscal {p} revenue of {x}", unit="million"),
    Attr("ticker", "price", "stock", "What is the last traded share price of {x}?", "the share price of {x}",
         posts=(_USD_SHARE,)),
    Attr("person", "birth_date", "person", "What is the date of birth of {x}?", "the date of birth of {x}",
         cmp=("is the youngest", "is the oldest"), posts=(_AGE,)),
    Attr("person", "occupation", "person", "What is the occupation of {x}?", "the occupation of {x}"),
    Attr("product", "price", "product", "What is the list price of {x}?", "the list price of {x}",
         posts=(_USD_PRICE,)),
    Attr("product", "weight_kg", "product", "How much does {x} weigh in kilograms?", "the weight of {x}",
         unit="kg", cmp=("is the heaviest", "is the lightest"), posts=(_LB,), percent=True),
    Attr("event", "start_date", "event", "On what date does {x} start?", "the start date of {x}",
         cmp=("starts latest", "starts earliest"), posts=(_WEEKDAY,)),
    Attr("event", "end_date", "event", "On what date does {x} end?", "the end date of {x}"),
]  # fmt: skip
_ATTRS_OF: dict[str, list[Attr]] = {}
for _a in ATTRS:
    _ATTRS_OF.setdefault(_a.etype, []).append(_a)

ANY_ROOT = ("city", "country", "company", "person", "product", "event")
DOMAIN_ROOTS = {
    "geography": ("city", "country"),
    "finance": ("company",),
    "people": ("person",),
    "retail": ("product",),
    "climate": ("city", "country", "event", "person", "company"),
    "events": ("event",),
}


# -- the trace under construction -------------------------------------------------------


@dataclass
class _Node:
    id: str
    question: str
    value: Value
    deps: list[str]
    kind: str | None
    args: dict[str, Any] | None
    hop: int


@dataclass
class _Measure:
    node: str
    value: Value
    attr: Attr
    param: Any  # month / fiscal year
    unit: str


@dataclass
class _Builder:
    world: World
    rng: random.Random
    domain: str
    nodes: list[_Node] = field(default_factory=list)
    kinds: dict[str, ToolKind] = field(default_factory=dict)

    # structure
    def _hop(self, deps: list[str]) -> int:
        by_id = {n.id: n for n in self.nodes}
        return 1 + max((by_id[d].hop for d in deps), default=0)

    def tool(self, kind: str, question: str, value: Value, deps: list[str], args_of: Callable[[Any], dict]) -> str:
        k = self.kind(kind)
        node = _Node(f"q{len(self.nodes) + 1}", question, value, deps, kind, args_of(k), self._hop(deps))
        self.nodes.append(node)
        return node.id

    def reason(self, question: str, value: Value, deps: list[str]) -> str:
        node = _Node(f"q{len(self.nodes) + 1}", question, value, deps, None, None, self._hop(deps))
        self.nodes.append(node)
        return node.id

    def kind(self, key: str) -> ToolKind:
        if key not in self.kinds:
            self.kinds[key] = make_kind(key, self.world, random.Random(self.rng.random()))
        return self.kinds[key]

    def value_of(self, node_id: str) -> Value:
        return next(n.value for n in self.nodes if n.id == node_id)

    # vocabulary
    def attrs(self, etype: str, *, need: Callable[[Attr], bool] = lambda a: True) -> list[Attr]:
        climate = self.domain == "climate"
        return [a for a in _ATTRS_OF.get(etype, []) if a.climate == climate and need(a)]

    def root(self, etypes: Sequence[str] | None = None) -> Ent:
        etype = self.rng.choice(list(etypes or DOMAIN_ROOTS[self.domain]))
        return Ent(etype, self.rng.choice(list(self.world.by_type(etype))))

    def walk(self, root: Ent, length: int, end: Callable[[Ent], bool], avoid: set[Ent] = frozenset()) -> list[Rel]:
        """`length` relation steps from root over distinct entities, ending where `end` holds."""
        if length == 0:
            if end(root):
                return []
            raise _Retry("root does not fit")
        for _ in range(30):
            seen, ent, rels = {root, *avoid}, root, []
            for _ in range(length):
                options = [r for r in _RELS_FROM.get(ent.etype, []) if r.resolve(self.world, ent) not in seen]
                if not options:
                    break
                rel = self.rng.choice(options)
                ent = rel.resolve(self.world, ent)
                seen.add(ent)
                rels.append(rel)
            if len(rels) == length and end(ent):
                return rels
        raise _Retry("no walk")

    # steps
    def chain(self, root: Ent, rels: list[Rel]) -> tuple[Ent, str | None]:
        ent, prev = root, None
        for rel in rels:
            nxt = rel.resolve(self.world, ent)
            deps = [prev] if prev else []
            question = rel.question.format(x=ent.display)
            if rel.kind == "list_cities":
                prev = self.tool(rel.kind, question, nxt.name, deps, lambda k, e=ent: k.args(e.name))
            else:
                prev = self.tool(rel.kind, question, nxt.name, deps, lambda k, e=ent, f=rel.field: k.args(e.name, f))
            ent = nxt
        return ent, prev

    def param_for(self, attr: Attr) -> Any:
        if attr.key == "temp":
            return self.rng.choice(MONTHS)
        if attr.key == "revenue":
            return self.rng.choice(FISCAL_YEARS)
        return None

    def measure(self, ent: Ent, attr: Attr, dep: str | None, param: Any = None) -> _Measure:
        w, deps = self.world, [dep] if dep else []
        p = param if param is not None else self.param_for(attr)
        question = attr.question.format(x=ent.display, p=_param_text(p))
        unit = attr.unit
        if attr.key == "temp":
            value: Value = w.cities[ent.name].temps_c[p]
            node = self.tool("climate", question, value, deps, lambda k: k.args(ent.name, p))
        elif attr.key == "revenue":
            company = w.companies[ent.name]
            value = company.financials[p]["revenue"]
            unit = f"million {company.currency}"
            node = self.tool("financials", question, value, deps, lambda k: k.args(ent.name, p, "revenue"))
        else:
            record = w.tickers()[ent.name] if ent.etype == "ticker" else w.by_type(ent.etype)[ent.name]
            value = getattr(record, "share_price" if ent.etype == "ticker" else attr.key)
            if attr.key == "price":
                unit = record.currency
            node = self.tool(attr.kind, question, value, deps, lambda k: k.args(ent.name, attr.key))
        return _Measure(node, value, attr, p, unit)

    def post(self, m: _Measure, post: Post, ent: Ent) -> tuple[str, Value, str]:
        v, question = m.value, post.question.format(v=_fmt(m.value), u=m.unit, p=_param_text(m.param))
        if post.key == "to_ft":
            out: Value = _round(_q(v) / _q(LENGTH_UNITS["ft"]), 2)
            node = self.tool("convert_units", question, out, [m.node], lambda k: k.args(v, "m", "ft"))
        elif post.key == "to_lb":
            out = _round(_q(v) / _q(MASS_UNITS["lb"]), 2)
            node = self.tool("convert_units", question, out, [m.node], lambda k: k.args(v, "kg", "lb"))
        elif post.key == "to_f":
            out = _round(_q(v) * sympy.Rational(9, 5) + 32, 2)
            node = self.tool("convert_units", question, out, [m.node], lambda k: k.args(v, "celsius", "fahrenheit"))
        elif post.key == "to_usd":
            out = self.fx(v, m.unit, "USD")
            node = self.tool("fx", question, out, [m.node], lambda k: k.args(v, m.unit, "USD"))
        elif post.key == "weekday":
            out = v.strftime("%A")
            node = self.tool("get_day_of_week", question, out, [m.node], lambda k: k.args(v))
        elif post.key == "age":
            on = m.param
            out = on.year - v.year - ((on.month, on.day) < (v.month, v.day))
            node = self.tool("calculate_age", question, out, [m.node], lambda k: k.args(v, on))
        else:
            raise KeyError(post.key)
        return node, out, post.unit

    def fx(self, amount: Value, src: str, dst: str) -> Decimal:
        r = self.world.usd_per_unit
        return _round(_q(amount) * _q(r[src]) / _q(r[dst]), 2)


def _param_text(p: Any) -> str:
    if isinstance(p, dt.date):
        return p.isoformat()
    if isinstance(p, str):
        return p.capitalize()
    return "" if p is None else str(p)


def _phrase(root: Ent, rels: list[Rel]) -> str:
    x = root.display
    for rel in rels:
        x = rel.np.format(x=x)
    return x


def _chain_question(b: _Builder, root: Ent, rels: list[Rel], template: str, p: Any) -> str:
    """Nested ("the country of the headquarters city of X") or stepwise ("First find ..., then ...")."""
    if len(rels) >= 2 and b.rng.random() < 0.5:
        x, steps = root.display, []
        for rel in rels:
            steps.append(rel.step.format(x=x))
            x = rel.ref
        return "First " + ", then ".join(steps) + ". " + template.format(x=x, p=_param_text(p))
    return _cap(template.format(x=_phrase(root, rels), p=_param_text(p)))


def _with_unit(v: Value, unit: str) -> str:
    return _fmt(v) + unit if unit == "%" else f"{_fmt(v)} {unit}".strip()


@dataclass
class _Task:
    question: str
    final: Value
    unit: str = ""


# -- scenario builders ------------------------------------------------------------------


def _single_hop(b: _Builder, depth: int) -> _Task:
    root = b.root()
    attr = b.rng.choice(b.attrs(root.etype) or _raise("no attribute"))
    m = b.measure(root, attr, None)
    return _Task(_cap(attr.question.format(x=root.display, p=_param_text(m.param))), m.value, m.unit)


def _multi_hop(b: _Builder, depth: int) -> _Task:
    use_post = b.rng.random() < 0.4 or depth == 2 and b.rng.random() < 0.5
    w = depth - 1 - int(use_post)
    root = b.root()

    def has_terminal(e: Ent) -> bool:
        return bool(b.attrs(e.etype, need=lambda a: bool(a.posts) or not use_post))

    rels = b.walk(root, w, has_terminal)
    end, last = b.chain(root, rels)
    attr = b.rng.choice(b.attrs(end.etype, need=lambda a: bool(a.posts) or not use_post))
    param = dt.date(b.rng.choice([2024, 2025]), b.rng.randint(1, 12), 1) if attr.key == "birth_date" else None
    m = b.measure(end, attr, last)
    if not use_post:
        return _Task(_chain_question(b, root, rels, attr.question, m.param), m.value, m.unit)
    post = b.rng.choice(attr.posts)
    if post.key == "age":
        m.param = param
    node, value, unit = b.post(m, post, end)
    return _Task(_chain_question(b, root, rels, post.main, m.param), value, unit)


def _parallel_single_hop(b: _Builder, depth: int) -> _Task:
    etypes = [t for t in DOMAIN_ROOTS[b.domain] if b.attrs(t, need=lambda a: a.cmp is not None)]
    etype = b.rng.choice(etypes)
    pool = list(b.world.by_type(etype))
    k = min(len(pool), b.rng.choice([2, 2, 3, 3, 4]))
    names = b.rng.sample(pool, k)
    attr = b.rng.choice(b.attrs(etype, need=lambda a: a.cmp is not None))
    param = b.param_for(attr)
    measures = [b.measure(Ent(etype, n), attr, None, param) for n in names]
    values = [m.value for m in measures]
    if len(set(values)) != len(values):
        raise _Retry("equal values")
    want_max = b.rng.random() < 0.5
    best = max(range(k), key=lambda i: values[i]) if want_max else min(range(k), key=lambda i: values[i])
    phrase = attr.cmp[0 if want_max else 1].format(p=_param_text(param))
    listed = _join([Ent(etype, n).display for n in names])
    with_values = _join([f"{Ent(etype, n).display} ({_fmt(v)})" for n, v in zip(names, values, strict=True)])
    b.reason(f"Which of {with_values} {phrase}?", names[best], [m.node for m in measures])
    return _Task(f"Which of {listed} {phrase}?", names[best])


def _side(b: _Builder, w: int, end: Callable[[Ent], bool], roots: Sequence[str] | None, avoid=frozenset()):
    """A branch: a root (of `roots`, default the domain's) and `w` relation steps to an entity
    satisfying `end`."""
    for _ in range(40):
        root = b.root(roots)
        if root in avoid:
            continue
        try:
            return root, b.walk(root, w, end, avoid=set(avoid))
        except _Retry:
            continue
    raise _Retry("no branch")


def _p_distance(b: _Builder, depth: int) -> _Task:
    w1, w2 = depth - 1, b.rng.randint(1, depth - 1)
    if b.rng.random() < 0.5:
        w1, w2 = w2, w1

    def is_city(e: Ent) -> bool:
        return e.etype == "city"

    r1, rels1 = _side(b, w1, is_city, None)
    r2, rels2 = _side(b, w2, is_city, ANY_ROOT, avoid={r1})
    if _walk_end(b, r1, rels1) == _walk_end(b, r2, rels2):
        raise _Retry("same city")
    e1, n1 = b.chain(r1, rels1)
    e2, n2 = b.chain(r2, rels2)
    km = b.world.distance(e1.name, e2.name)
    unit = b.rng.choice(["km", "km", "mi"])
    value: Value = km if unit == "km" else _round(_q(km) / sympy.Rational("1.609344"), 1)
    b.tool(
        "distance",
        f"What is the road distance between {e1.name} and {e2.name} in {unit}?",
        value,
        [n1, n2],
        lambda k: k.args(e1.name, e2.name, unit),
    )
    unit_word = "kilometres" if unit == "km" else "miles"
    question = _cap(
        f"what is the road distance, in {unit_word}, between {_phrase(r1, rels1)} and {_phrase(r2, rels2)}?"
    )
    return _Task(question, value, unit)


def _walk_end(b: _Builder, root: Ent, rels: list[Rel]) -> Ent:
    ent = root
    for rel in rels:
        ent = rel.resolve(b.world, ent)
    return ent


def _p_percent(b: _Builder, depth: int) -> _Task:
    wa, wb = depth - 2, b.rng.randint(0, depth - 2)  # branch a, the longest, starts in the domain
    candidates = [a for a in ATTRS if a.percent and not a.climate and (wa or a.etype in DOMAIN_ROOTS[b.domain])]
    attr = b.rng.choice(candidates or _raise("no attribute"))

    def fits(e: Ent) -> bool:
        return e.etype == attr.etype

    r1, rels1 = _side(b, wa, fits, None if wa else (attr.etype,))
    r2, rels2 = _side(b, wb, fits, ANY_ROOT if wb else (attr.etype,), avoid={r1})
    if _walk_end(b, r1, rels1) == _walk_end(b, r2, rels2):
        raise _Retry("same entity")
    end1, n1 = b.chain(r1, rels1)
    end2, n2 = b.chain(r2, rels2)
    m1, m2 = b.measure(end1, attr, n1), b.measure(end2, attr, n2)
    if m1.value == m2.value:
        raise _Retry("equal values")
    (small, ps), (big, pb) = sorted([(m1, _phrase(r1, rels1)), (m2, _phrase(r2, rels2))], key=lambda t: t[0].value)
    value = _round((_q(big.value) - _q(small.value)) / _q(small.value) * 100, 2)
    b.tool(
        "calculate_percentage_change",
        f"What is the percentage change from {_fmt(small.value)} to {_fmt(big.value)}?",
        value,
        [small.node, big.node],
        lambda k: k.args(small.value, big.value),
    )
    question = f"By what percentage is {attr.np.format(x=pb, p='')} greater than {attr.np.format(x=ps, p='')}?"
    return _Task(_cap(question), value, "%")


def _p_growth(b: _Builder, depth: int) -> _Task:
    root, rels = _side(b, depth - 2, lambda e: e.etype == "company", None)
    end, last = b.chain(root, rels)
    y1, y2 = sorted(b.rng.sample(FISCAL_YEARS, 2))
    attr = next(a for a in ATTRS if a.key == "revenue")
    m1, m2 = b.measure(end, attr, last, y1), b.measure(end, attr, last, y2)
    value = _round((_q(m2.value) - _q(m1.value)) / _q(m1.value) * 100, 2)
    b.tool(
        "calculate_percentage_change",
        f"What is the percentage change from {_fmt(m1.value)} to {_fmt(m2.value)}?",
        value,
        [m1.node, m2.node],
        lambda k: k.args(m1.value, m2.value),
    )
    question = f"By what percentage did the revenue of {_phrase(root, rels)} grow from fiscal year {y1} to {y2}?"
    return _Task(question, value, "%")


def _p_density(b: _Builder, depth: int) -> _Task:
    root, rels = _side(b, depth - 2, lambda e: e.etype == "country", None)
    end, last = b.chain(root, rels)
    attrs = {a.key: a for a in _ATTRS_OF["country"]}
    pop, area = b.measure(end, attrs["population"], last), b.measure(end, attrs["area_km2"], last)
    value = _round(_q(pop.value) / _q(area.value), 2)
    b.tool(
        "calculate_population_density",
        f"What is the population density of a country with {pop.value} inhabitants and {area.value} km²?",
        value,
        [pop.node, area.node],
        lambda k: k.args(pop.value, area.value),
    )
    return _Task(f"What is the population density of {_phrase(root, rels)}, in inhabitants per km²?", value, "per km²")


def _p_fx(b: _Builder, depth: int) -> _Task:
    product = Ent("product", b.rng.choice(list(b.world.products)))
    price_attr = next(a for a in _ATTRS_OF["product"] if a.key == "price")
    roots = ("country",) if depth == 2 else (ANY_ROOT if b.domain == "retail" else None)
    croot, rels = _side(b, depth - 2, lambda e: e.etype == "country", roots)
    target = b.world.countries[_walk_end(b, croot, rels).name].currency
    if target == b.world.products[product.name].currency:
        raise _Retry("same currency")
    price = b.measure(product, price_attr, None)
    end, last = b.chain(croot, rels)
    cur_q = f"Which currency does {end.name} use?"
    cur = b.tool("country", cur_q, target, [last] if last else [], lambda k: k.args(end.name, "currency"))
    value = b.fx(price.value, price.unit, target)
    b.tool(
        "fx",
        f"What is {_fmt(price.value)} {price.unit} in {target}?",
        value,
        [price.node, cur],
        lambda k: k.args(price.value, price.unit, target),
    )
    question = f"How much does {product.display} cost in the currency of {_phrase(croot, rels)}?"
    return _Task(question, value, target)


def _p_aggregate(b: _Builder, depth: int) -> _Task:
    climate = b.domain == "climate"
    candidates = [
        a for a in ATTRS if a.stat and a.climate == climate and (depth > 2 or a.etype in DOMAIN_ROOTS[b.domain])
    ]
    attr = b.rng.choice(candidates or _raise("no attribute"))
    k = b.rng.choice([2, 3])
    ws = [depth - 2] + [b.rng.randint(0, depth - 2) for _ in range(k - 1)]  # branch 0 starts in the domain
    param = b.param_for(attr)
    sides, ends = [], set()
    for i, w in enumerate(ws):
        roots = (attr.etype,) if w == 0 else (None if i == 0 else ANY_ROOT)
        root, rels = _side(b, w, lambda e: e.etype == attr.etype, roots, avoid=ends)
        end = _walk_end(b, root, rels)
        if end in ends:
            raise _Retry("repeated entity")
        ends.add(end)
        sides.append((root, rels))
    measures, phrases = [], []
    for root, rels in sides:
        end, last = b.chain(root, rels)
        measures.append(b.measure(end, attr, last, param))
        phrases.append(_phrase(root, rels))
    values = [m.value for m in measures]
    noun = attr.noun.format(p=_param_text(param))
    if attr.stat == "sum":
        value: Value = sum(values)
        question = f"What is the combined {noun} of {_join(phrases)}?"
    else:
        value = _round(sum(_q(v) for v in values) / len(values), 2)
        question = f"What is the mean {noun} of {_join(phrases)}, in {attr.unit}?"
    listed = ", ".join(_fmt(v) for v in values)
    b.tool(
        "compute_statistics",
        f"What is the {attr.stat} of {listed}?",
        value,
        [m.node for m in measures],
        lambda kd: kd.args(values, attr.stat),
    )
    return _Task(question, value, attr.unit)


def _p_temp_range(b: _Builder, depth: int) -> _Task:
    root, rels = _side(b, depth - 2, lambda e: e.etype == "city", None)
    end, last = b.chain(root, rels)
    attr = next(a for a in ATTRS if a.key == "temp")
    m1, m2 = b.measure(end, attr, last, "january"), b.measure(end, attr, last, "july")
    value = abs(m1.value - m2.value)
    if not value:
        raise _Retry("no range")
    b.tool(
        "compute_statistics",
        f"What is the range of {_fmt(m1.value)} and {_fmt(m2.value)}?",
        value,
        [m1.node, m2.node],
        lambda k: k.args([m1.value, m2.value], "range"),
    )
    question = f"How many degrees Celsius apart are the average January and July temperatures in {_phrase(root, rels)}?"
    return _Task(question, value, "°C")


def _p_duration(b: _Builder, depth: int) -> _Task:
    if depth != 2:
        raise _Retry("durations are two hops")
    attrs = {a.key: a for a in _ATTRS_OF["event"]}
    if b.rng.random() < 0.5:
        ev = Ent("event", b.rng.choice(list(b.world.events)))
        s, e = b.measure(ev, attrs["start_date"], None), b.measure(ev, attrs["end_date"], None)
        value = (e.value - s.value).days + 1
        b.tool(
            "days_between_dates",
            f"How many days are there from {_fmt(s.value)} to {_fmt(e.value)}, counting both days?",
            value,
            [s.node, e.node],
            lambda k: k.args(s.value, e.value, True),
        )
        return _Task(f"How many days does {ev.display} last, counting the first and the last day?", value, "days")
    a, c = (Ent("event", n) for n in b.rng.sample(list(b.world.events), 2))
    sa, sc = b.measure(a, attrs["start_date"], None), b.measure(c, attrs["start_date"], None)
    if sa.value == sc.value:
        raise _Retry("same start")
    (first, fe), (second, se) = sorted([(sa, a), (sc, c)], key=lambda t: t[0].value)
    value = (second.value - first.value).days
    b.tool(
        "days_between_dates",
        f"How many days are there from {_fmt(first.value)} to {_fmt(second.value)}?",
        value,
        [first.node, second.node],
        lambda k: k.args(first.value, second.value, False),
    )
    return _Task(f"How many days after the start of {fe.display} does {se.display} start?", value, "days")


_PARALLEL_MULTI = {
    "geography": (_p_distance, _p_percent, _p_density, _p_aggregate),
    "finance": (_p_growth, _p_percent, _p_distance, _p_aggregate, _p_fx),
    "people": (_p_distance, _p_fx, _p_growth),
    "retail": (_p_fx, _p_growth, _p_distance),
    "climate": (_p_aggregate, _p_temp_range),
    "events": (_p_duration, _p_distance),
}

_BUILDERS = {
    ScenarioType.SINGLE_HOP: _single_hop,
    ScenarioType.MULTI_HOP: _multi_hop,
    ScenarioType.PARALLEL_SINGLE_HOP: _parallel_single_hop,
}


def _raise(msg: str):
    raise _Retry(msg)


# -- assembly ---------------------------------------------------------------------------


def _assemble(b: _Builder, task: _Task, stype: ScenarioType, seed: int, index: int) -> EnvSpec:
    names = {key: kind.name for key, kind in b.kinds.items()}
    golden: dict[str, list[GoldenCall]] = {key: [] for key in b.kinds}
    for n in b.nodes:
        if n.kind is None:
            continue
        call = GoldenCall(args=n.args, expected=_fmt(n.value))
        if call not in golden[n.kind]:
            golden[n.kind].append(call)
    tools = []
    for key, kind in b.kinds.items():
        d = kind.draft()
        tools.append(
            ToolSpec(
                name=d.name,
                description=d.description,
                parameters=json.loads(json.dumps(d.parameters)),
                source=d.source,
                golden_calls=golden[key],
            )
        )
    subs = [
        SubQuestion(
            id=n.id,
            question=n.question,
            answer=_fmt(n.value),
            depends_on=list(n.deps),
            needs_tool=n.kind is not None,
            tool=names[n.kind] if n.kind else None,
            hop_level=n.hop,
            match=_rule(n.value),
        )
        for n in b.nodes
    ]
    tool_nodes = [n for n in b.nodes if n.kind]
    hops = max(n.hop for n in tool_nodes)
    if classify(len(tool_nodes), hops) is not stype:
        raise _Retry(f"built {classify(len(tool_nodes), hops)} for {stype}")
    return EnvSpec.create(
        domain=b.domain,
        question=task.question,
        final_answer=_with_unit(task.final, task.unit),
        scenario_type=stype,
        sub_questions=subs,
        tools=tools,
        final_match=_rule(task.final),
        provenance=Provenance(generator=GENERATOR, seed=seed, source=f"{GENERATOR}:{FAMILY_VERSION}:{seed}:{index}"),
    )


def _one(seed: int, index: int, max_hops: int, domains: Sequence[str], types: Sequence[ScenarioType]) -> EnvSpec:
    # Domain, type and depth are drawn once per index, so a combination that often needs redraws
    # is not under-represented; after half the attempts the depth is redrawn too (a domain's
    # relations may not allow chains as long as max_hops).
    pick = random.Random(f"{GENERATOR}/{FAMILY_VERSION}/{seed}/{index}")
    domain, stype = pick.choice(list(domains)), pick.choice(list(types))
    multi = stype in (ScenarioType.MULTI_HOP, ScenarioType.PARALLEL_MULTI_HOP)
    depth = pick.randint(2, max_hops) if multi else 1
    for attempt in range(_ATTEMPTS):
        rng = random.Random(f"{GENERATOR}/{FAMILY_VERSION}/{seed}/{index}/{attempt}")
        if multi and attempt >= _ATTEMPTS // 2:
            depth = rng.randint(2, max_hops)
        b = _Builder(build_world(rng), rng, domain)
        build = _BUILDERS.get(stype) or rng.choice(_PARALLEL_MULTI[domain])
        try:
            task = build(b, depth)
            return _assemble(b, task, stype, seed, index)
        except _Retry:
            continue
    raise RuntimeError(
        f"procedural generator found no {stype.value} task in {domain} for seed {seed}, index {index} in "
        f"{_ATTEMPTS} attempts (max_hops {max_hops}); this is a bug"
    )


def iter_generate(
    n: int,
    seed: int = 0,
    max_hops: int = 4,
    domains: Sequence[str] | None = None,
    *,
    scenario_types: Sequence[ScenarioType | str] | None = None,
) -> Iterator[EnvSpec]:
    """Yield `n` distinct environments (see `generate`)."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if max_hops < 1:
        raise ValueError(f"max_hops must be >= 1, got {max_hops}")
    domains = list(domains or DOMAINS)
    unknown = [d for d in domains if d not in DOMAINS]
    if unknown:
        raise ValueError(f"unknown domain(s) {unknown}; the procedural family has {list(DOMAINS)}")
    types = [ScenarioType(t) for t in (scenario_types or SCENARIO_TYPES)]
    if max_hops == 1:
        multi = [t for t in types if t in (ScenarioType.MULTI_HOP, ScenarioType.PARALLEL_MULTI_HOP)]
        types = [t for t in types if t not in multi]
        if not types:
            raise ValueError(f"{[t.value for t in multi]} need max_hops >= 2")
    seen: set[str] = set()
    index = 0
    while len(seen) < n:
        env = _one(seed, index, max_hops, domains, types)
        index += 1
        if env.id not in seen:
            seen.add(env.id)
            yield env


def generate(
    n: int,
    seed: int = 0,
    max_hops: int = 4,
    domains: Sequence[str] | None = None,
    *,
    scenario_types: Sequence[ScenarioType | str] | None = None,
) -> list[EnvSpec]:
    """`n` distinct procedural environments, deterministic per seed (same seed: same envs, same
    ids, in the same order). `max_hops` bounds the longest tool chain; `domains` is a subset of
    `DOMAINS`; `scenario_types` restricts the four types (default: all, drawn uniformly)."""
    return list(iter_generate(n, seed, max_hops, domains, scenario_types=scenario_types))
