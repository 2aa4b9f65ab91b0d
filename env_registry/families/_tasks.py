"""Task builders of the procedural family: walks over a world's relations that become a
question, its decomposition into sub-questions, and the golden call of each.

A `Builder` records the trace as it is built (one node per sub-question: its concrete question,
exact answer, dependencies and, for a tool node, the tool kind and call arguments). The scenario
builders (`single_hop`, `multi_hop`, `parallel_single_hop` and the parallel multi-hop shapes
`p_*`) each make one task or raise `Retry`; `Domain` rows say which roots and shapes a domain
uses.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy

from env_registry.families._tools import ToolKind, make_kind
from env_registry.families._values import Retry, Value, exact, fmt, round_half_up, rule_for
from env_registry.families._vocabulary import Attr, Measured, Post, Rel, Vocabulary, convert_money
from env_registry.families._world import (
    CITY,
    COMPANY,
    COUNTRY,
    EVENT,
    FISCAL_YEARS,
    PERSON,
    PRODUCT,
    EntityType,
    World,
)
from env_registry.matching import answer_in_output

ANY_ROOT = (CITY, COUNTRY, COMPANY, PERSON, PRODUCT, EVENT)


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _param_text(p: Any) -> str:
    if isinstance(p, dt.date):
        return p.isoformat()
    if isinstance(p, str):
        return p.capitalize()
    return "" if p is None else str(p)


@dataclass(frozen=True)
class Ent:
    etype: EntityType
    name: str

    @property
    def display(self) -> str:
        return self.etype.display(self.name)


@dataclass
class Node:
    id: str
    question: str
    value: Value
    deps: list[str]
    kind: str | None  # tool kind; None for a leaf answered by reasoning
    args: dict[str, Any] | None
    hop: int
    rivals: tuple[str, ...] = ()  # a comparison leaf's other candidates


@dataclass
class _Measure:
    node: str
    value: Value
    param: Any  # month / fiscal year; an age's reference date after `post`
    unit: str


@dataclass(frozen=True)
class Task:
    question: str
    final: Value
    unit: str = ""
    rivals: tuple[str, ...] = ()  # the other candidates a comparison offers


@dataclass(frozen=True)
class Domain:
    """A topic: where its tasks start and which parallel multi-hop shapes it uses."""

    name: str
    roots: tuple[EntityType, ...]
    parallel_multi: tuple[Callable[[Builder, int], Task], ...]
    climate: bool = False  # asks the climate attributes, and only those
    open_branches: bool = False  # a second branch (the country whose currency a price is asked in) starts anywhere


@dataclass
class Builder:
    world: World
    rng: random.Random
    domain: Domain
    vocab: Vocabulary
    nodes: list[Node] = field(default_factory=list)
    kinds: dict[str, ToolKind] = field(default_factory=dict)

    # structure
    def _hop(self, deps: list[str]) -> int:
        by_id = {n.id: n for n in self.nodes}
        return 1 + max((by_id[d].hop for d in deps), default=0)

    def tool(self, kind: str, question: str, value: Value, deps: list[str], args_of: Callable[[Any], dict]) -> str:
        args = args_of(self.kind(kind))
        answer = fmt(value)
        if not answer_in_output(answer, answer, args, rule_for(value)):
            # The reward masks what a call was given: an answer equal to an input cannot be retrieved.
            raise Retry("the answer echoes an argument")
        node = Node(f"q{len(self.nodes) + 1}", question, value, deps, kind, args, self._hop(deps))
        self.nodes.append(node)
        return node.id

    def reason(self, question: str, value: Value, deps: list[str], rivals: tuple[str, ...] = ()) -> str:
        node = Node(f"q{len(self.nodes) + 1}", question, value, deps, None, None, self._hop(deps), rivals)
        self.nodes.append(node)
        return node.id

    def kind(self, key: str) -> ToolKind:
        if key not in self.kinds:
            self.kinds[key] = make_kind(key, self.world, random.Random(self.rng.random()))
        return self.kinds[key]

    # vocabulary
    def attrs(self, etype: EntityType, *, need: Callable[[Attr], bool] = lambda a: True) -> list[Attr]:
        return [a for a in self.vocab.attrs_of(etype) if a.climate == self.domain.climate and need(a)]

    def root(self, etypes: Sequence[EntityType] | None = None) -> Ent:
        etype = self.rng.choice(list(etypes or self.domain.roots))
        return Ent(etype, self.rng.choice(list(etype.records(self.world))))

    def walk(self, root: Ent, length: int, end: Callable[[Ent], bool], avoid: set[Ent] = frozenset()) -> list[Rel]:
        """`length` relation steps from root over distinct entities, ending where `end` holds."""
        if length == 0:
            if end(root):
                return []
            raise Retry("root does not fit")
        for _ in range(30):
            seen, ent, rels = {root, *avoid}, root, []
            for _ in range(length):
                steps = ((r, self.step(r, ent)) for r in self.vocab.rels_from(ent.etype))
                options = [r for r, nxt in steps if nxt.name is not None and nxt not in seen]
                if not options:
                    break
                rel = self.rng.choice(options)
                ent = self.step(rel, ent)
                seen.add(ent)
                rels.append(rel)
            if len(rels) == length and end(ent):
                return rels
        raise Retry("no walk")

    def step(self, rel: Rel, ent: Ent) -> Ent:
        return Ent(rel.target, rel.resolve(self.world, ent.name))

    # steps
    def chain(self, root: Ent, rels: list[Rel], dep: str | None = None) -> tuple[Ent, str | None]:
        """One tool node per relation step from `root` (found by node `dep`, if any)."""
        ent, prev = root, dep
        for rel in rels:
            nxt = self.step(rel, ent)
            question = rel.link.question.format(x=ent.display)
            prev = self.tool(
                rel.tool, question, nxt.name, [prev] if prev else [], lambda k, e=ent, r=rel: r.args(k, e.name)
            )
            ent = nxt
        return ent, prev

    def param_for(self, attr: Attr) -> Any:
        return attr.draw(self.rng) if attr.draw else None

    def measure(self, ent: Ent, attr: Attr, dep: str | None, param: Any = None) -> _Measure:
        p = param if param is not None else self.param_for(attr)
        question = attr.ask.question.format(x=ent.display, p=_param_text(p))
        value = attr.read(self.world, ent.name, p)
        node = self.tool(attr.tool, question, value, [dep] if dep else [], lambda k: attr.args(k, ent.name, p))
        return _Measure(node, value, p, attr.unit(self.world, ent.name))

    def post(self, m: _Measure, post: Post) -> tuple[str, Value, str]:
        measured = Measured(m.value, m.unit, m.param)
        question = post.question.format(v=fmt(m.value), u=m.unit, p=_param_text(m.param))
        out = post.apply(self.world, measured)
        node = self.tool(post.tool, question, out, [m.node], lambda k: post.args(k, measured))
        return node, out, post.unit

    def side(self, w: int, end: Callable[[Ent], bool], roots: Sequence[EntityType] | None, avoid=frozenset()):
        """A branch: a root (of `roots`, default the domain's) and `w` relation steps to an
        entity satisfying `end`."""
        for _ in range(40):
            root = self.root(roots)
            if root in avoid:
                continue
            try:
                return root, self.walk(root, w, end, avoid=set(avoid))
            except Retry:
                continue
        raise Retry("no branch")

    def walk_end(self, root: Ent, rels: list[Rel]) -> Ent:
        ent = root
        for rel in rels:
            ent = self.step(rel, ent)
        return ent


def _phrase(root: Ent, rels: list[Rel]) -> str:
    x = root.display
    for rel in rels:
        x = rel.link.np.format(x=x)
    return x


def _chain_question(b: Builder, root: Ent, rels: list[Rel], template: str, p: Any) -> str:
    """Nested ("the country of the headquarters city of X") or stepwise ("First find ..., then ...")."""
    if len(rels) >= 2 and b.rng.random() < 0.5:
        x, steps = root.display, []
        for rel in rels:
            steps.append(rel.link.step.format(x=x))
            x = rel.link.ref
        return "First " + ", then ".join(steps) + ". " + template.format(x=x, p=_param_text(p))
    return _cap(template.format(x=_phrase(root, rels), p=_param_text(p)))


def _pick(options: Sequence[Any], why: str) -> Any:
    if not options:
        raise Retry(why)
    return options


# -- scenario builders ------------------------------------------------------------------


def single_hop(b: Builder, depth: int) -> Task:
    root = b.root()
    attr = b.rng.choice(_pick(b.attrs(root.etype), "no attribute"))
    m = b.measure(root, attr, None)
    return Task(_cap(attr.ask.question.format(x=root.display, p=_param_text(m.param))), m.value, m.unit)


def multi_hop(b: Builder, depth: int) -> Task:
    use_post = b.rng.random() < 0.4 or depth == 2 and b.rng.random() < 0.5
    w = depth - 1 - int(use_post)
    root = b.root()

    def terminal(a: Attr) -> bool:
        return bool(a.ask.posts) or not use_post

    rels = b.walk(root, w, lambda e: bool(b.attrs(e.etype, need=terminal)))
    end, last = b.chain(root, rels)
    attr = b.rng.choice(b.attrs(end.etype, need=terminal))
    drawn = {p.key: p.draw(b.rng) for p in attr.ask.posts if p.draw}  # before measuring, as a post needs them
    m = b.measure(end, attr, last)
    if not use_post:
        return Task(_chain_question(b, root, rels, attr.ask.question, m.param), m.value, m.unit)
    post = b.rng.choice(attr.ask.posts)
    if post.key in drawn:
        m.param = drawn[post.key]
    node, value, unit = b.post(m, post)
    return Task(_chain_question(b, root, rels, post.main, m.param), value, unit)


def parallel_single_hop(b: Builder, depth: int) -> Task:
    """Which of k entities has the most or least of an attribute (looked up in parallel); half
    of the time across two entity types compared on a shared attribute (a city's and a
    company's founding year: two different tools)."""
    pairs = _cross_pairs(b) if b.rng.random() < 0.5 else []
    if pairs:
        a1, a2 = b.rng.choice(pairs)
        entities = [Ent(a.etype, n) for a in (a1, a2) for n in b.rng.sample(list(a.etype.records(b.world)), 1)]
        attrs = [a1, a2]
    else:
        etypes = [t for t in b.domain.roots if b.attrs(t, need=lambda a: a.ask.cmp is not None)]
        etype = b.rng.choice(etypes)
        pool = list(etype.records(b.world))
        k = min(len(pool), b.rng.choice([2, 2, 3, 3, 4]))
        entities = [Ent(etype, n) for n in b.rng.sample(pool, k)]
        attrs = [b.rng.choice(b.attrs(etype, need=lambda a: a.ask.cmp is not None))] * k
    param = b.param_for(attrs[0])
    measures = [b.measure(e, a, None, param) for e, a in zip(entities, attrs, strict=True)]
    return _compare(b, [e.display for e in entities], entities, attrs[0], measures, param)


def _cross_pairs(b: Builder) -> list[tuple[Attr, Attr]]:
    keyed = [a for a in b.vocab.all_attrs if a.ask.cmp_key and a.climate == b.domain.climate]
    return [(x, y) for x in keyed for y in keyed if x.ask.cmp_key == y.ask.cmp_key and x.etype != y.etype]


def _compare(b: Builder, phrases: list[str], ends: list[Ent], attr: Attr, measures: list, param: Any) -> Task:
    """The reasoning leaf of a comparison: which of `ends` (named in the question by `phrases`)
    has the most or least; the others are the answer's rivals."""
    values = [m.value for m in measures]
    if len(set(values)) != len(values):
        raise Retry("equal values")
    want_max = b.rng.random() < 0.5
    best = (
        max(range(len(values)), key=lambda i: values[i])
        if want_max
        else min(range(len(values)), key=lambda i: values[i])
    )
    phrase = attr.ask.cmp[0 if want_max else 1].format(p=_param_text(param))
    order = _winner_at_random(best, [phrases, [fmt(v) for v in values], want_max])
    with_values = _join([f"{ends[i].display} ({fmt(values[i])})" for i in order])
    rivals = tuple(ends[i].name for i in order if i != best)
    b.reason(f"Which of {with_values} {phrase}?", ends[best].name, [m.node for m in measures], rivals)
    return Task(f"Which of {_join([phrases[i] for i in order])} {phrase}?", ends[best].name, rivals=rivals)


def _winner_at_random(best: int, content: list[Any]) -> list[int]:
    """The order the candidates are listed in: as built, with the winner swapped to a position
    drawn uniformly, so no listing position wins more often than chance (a fixed-position guess
    earns nothing). Drawn from the task's content, not `b.rng`: every other draw of the build,
    and every environment without a comparison, stays as it was."""
    k = len(content[1])
    order = list(range(k))
    pos = random.Random(repr(content)).randrange(k)
    order[best], order[pos] = order[pos], order[best]
    return order


def p_distance(b: Builder, depth: int) -> Task:
    w1, w2 = depth - 1, b.rng.randint(1, depth - 1)
    if b.rng.random() < 0.5:
        w1, w2 = w2, w1

    def is_city(e: Ent) -> bool:
        return e.etype == CITY

    r1, rels1 = b.side(w1, is_city, None)
    r2, rels2 = b.side(w2, is_city, ANY_ROOT, avoid={r1})
    if b.walk_end(r1, rels1) == b.walk_end(r2, rels2):
        raise Retry("same city")
    e1, n1 = b.chain(r1, rels1)
    e2, n2 = b.chain(r2, rels2)
    km = b.world.distance(e1.name, e2.name)
    unit = b.rng.choice(["km", "km", "mi"])
    value: Value = km if unit == "km" else round_half_up(exact(km) / sympy.Rational("1.609344"), 1)
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
    return Task(question, value, unit)


def _percent_change(b: Builder, old: _Measure, new: _Measure) -> Value:
    """The percentage change from one measured value to another, by one more tool call."""
    value = round_half_up((exact(new.value) - exact(old.value)) / exact(old.value) * 100, 2)
    b.tool(
        "calculate_percentage_change",
        f"What is the percentage change from {fmt(old.value)} to {fmt(new.value)}?",
        value,
        [old.node, new.node],
        lambda k: k.args(old.value, new.value),
    )
    return value


def p_percent(b: Builder, depth: int) -> Task:
    wa, wb = depth - 2, b.rng.randint(0, depth - 2)  # branch a, the longest, starts in the domain
    candidates = [a for a in b.vocab.all_attrs if a.ask.percent and not a.climate and (wa or a.etype in b.domain.roots)]
    attr = b.rng.choice(_pick(candidates, "no attribute"))

    def fits(e: Ent) -> bool:
        return e.etype == attr.etype

    r1, rels1 = b.side(wa, fits, None if wa else (attr.etype,))
    r2, rels2 = b.side(wb, fits, ANY_ROOT if wb else (attr.etype,), avoid={r1})
    if b.walk_end(r1, rels1) == b.walk_end(r2, rels2):
        raise Retry("same entity")
    end1, n1 = b.chain(r1, rels1)
    end2, n2 = b.chain(r2, rels2)
    m1, m2 = b.measure(end1, attr, n1), b.measure(end2, attr, n2)
    if m1.value == m2.value:
        raise Retry("equal values")
    (small, ps), (big, pb) = sorted([(m1, _phrase(r1, rels1)), (m2, _phrase(r2, rels2))], key=lambda t: t[0].value)
    value = _percent_change(b, small, big)
    question = f"By what percentage is {attr.ask.np.format(x=pb, p='')} greater than {attr.ask.np.format(x=ps, p='')}?"
    return Task(_cap(question), value, "%")


def p_growth(b: Builder, depth: int) -> Task:
    root, rels = b.side(depth - 2, lambda e: e.etype == COMPANY, None)
    end, last = b.chain(root, rels)
    y1, y2 = sorted(b.rng.sample(FISCAL_YEARS, 2))
    attr = b.vocab.attr(COMPANY, "revenue")
    m1, m2 = b.measure(end, attr, last, y1), b.measure(end, attr, last, y2)
    value = _percent_change(b, m1, m2)
    question = f"By what percentage did the revenue of {_phrase(root, rels)} grow from fiscal year {y1} to {y2}?"
    return Task(question, value, "%")


def p_density(b: Builder, depth: int) -> Task:
    root, rels = b.side(depth - 2, lambda e: e.etype == COUNTRY, None)
    end, last = b.chain(root, rels)
    pop = b.measure(end, b.vocab.attr(COUNTRY, "population"), last)
    area = b.measure(end, b.vocab.attr(COUNTRY, "area_km2"), last)
    value = round_half_up(exact(pop.value) / exact(area.value), 2)
    b.tool(
        "calculate_population_density",
        f"What is the population density of a country with {pop.value} inhabitants and {area.value} km²?",
        value,
        [pop.node, area.node],
        lambda k: k.args(pop.value, area.value),
    )
    return Task(f"What is the population density of {_phrase(root, rels)}, in inhabitants per km²?", value, "per km²")


def p_fx(b: Builder, depth: int) -> Task:
    product = Ent(PRODUCT, b.rng.choice(list(b.world.products)))
    price_attr = b.vocab.attr(PRODUCT, "price")
    roots = (COUNTRY,) if depth == 2 else (ANY_ROOT if b.domain.open_branches else None)
    croot, rels = b.side(depth - 2, lambda e: e.etype == COUNTRY, roots)
    target = b.world.countries[b.walk_end(croot, rels).name].currency
    if target == b.world.products[product.name].currency:
        raise Retry("same currency")
    price = b.measure(product, price_attr, None)
    end, last = b.chain(croot, rels)
    cur_q = f"Which currency does {end.name} use?"
    cur = b.tool("country", cur_q, target, [last] if last else [], lambda k: k.args(end.name, "currency"))
    value = convert_money(b.world, price.value, price.unit, target)
    b.tool(
        "fx",
        f"What is {fmt(price.value)} {price.unit} in {target}?",
        value,
        [price.node, cur],
        lambda k: k.args(price.value, price.unit, target),
    )
    question = f"How much does {product.display} cost in the currency of {_phrase(croot, rels)}?"
    return Task(question, value, target)


def p_aggregate(b: Builder, depth: int) -> Task:
    candidates = [
        a
        for a in b.vocab.all_attrs
        if a.ask.stat and a.climate == b.domain.climate and (depth > 2 or a.etype in b.domain.roots)
    ]
    attr = b.rng.choice(_pick(candidates, "no attribute"))
    k = b.rng.choice([2, 3])
    ws = [depth - 2] + [b.rng.randint(0, depth - 2) for _ in range(k - 1)]  # branch 0 starts in the domain
    param = b.param_for(attr)
    sides, ends = [], set()
    for i, w in enumerate(ws):
        roots = (attr.etype,) if w == 0 else (None if i == 0 else ANY_ROOT)
        root, rels = b.side(w, lambda e: e.etype == attr.etype, roots, avoid=ends)
        end = b.walk_end(root, rels)
        if end in ends:
            raise Retry("repeated entity")
        ends.add(end)
        sides.append((root, rels))
    measures, phrases = [], []
    for root, rels in sides:
        end, last = b.chain(root, rels)
        measures.append(b.measure(end, attr, last, param))
        phrases.append(_phrase(root, rels))
    values = [m.value for m in measures]
    noun = attr.ask.noun.format(p=_param_text(param))
    if attr.ask.stat == "sum":
        value: Value = sum(values)
        question = f"What is the combined {noun} of {_join(phrases)}?"
    else:
        value = round_half_up(sum(exact(v) for v in values) / len(values), 2)
        question = f"What is the mean {noun} of {_join(phrases)}, in {attr.ask.unit}?"
    listed = ", ".join(fmt(v) for v in values)
    b.tool(
        "compute_statistics",
        f"What is the {attr.ask.stat} of {listed}?",
        value,
        [m.node for m in measures],
        lambda kd: kd.args(values, attr.ask.stat),
    )
    return Task(question, value, attr.ask.unit)


def p_temp_range(b: Builder, depth: int) -> Task:
    root, rels = b.side(depth - 2, lambda e: e.etype == CITY, None)
    end, last = b.chain(root, rels)
    attr = b.vocab.attr(CITY, "temp")
    m1, m2 = b.measure(end, attr, last, "january"), b.measure(end, attr, last, "july")
    value = abs(m1.value - m2.value)
    if not value:
        raise Retry("no range")
    b.tool(
        "compute_statistics",
        f"What is the range of {fmt(m1.value)} and {fmt(m2.value)}?",
        value,
        [m1.node, m2.node],
        lambda k: k.args([m1.value, m2.value], "range"),
    )
    question = f"How many degrees Celsius apart are the average January and July temperatures in {_phrase(root, rels)}?"
    return Task(question, value, "°C")


def p_duration(b: Builder, depth: int) -> Task:
    if depth != 2:
        raise Retry("durations are two hops")
    start, end = b.vocab.attr(EVENT, "start_date"), b.vocab.attr(EVENT, "end_date")
    if b.rng.random() < 0.5:
        ev = Ent(EVENT, b.rng.choice(list(b.world.events)))
        s, e = b.measure(ev, start, None), b.measure(ev, end, None)
        value = (e.value - s.value).days + 1
        b.tool(
            "days_between_dates",
            f"How many days are there from {fmt(s.value)} to {fmt(e.value)}, counting both days?",
            value,
            [s.node, e.node],
            lambda k: k.args(s.value, e.value, True),
        )
        return Task(f"How many days does {ev.display} last, counting the first and the last day?", value, "days")
    a, c = (Ent(EVENT, n) for n in b.rng.sample(list(b.world.events), 2))
    sa, sc = b.measure(a, start, None), b.measure(c, start, None)
    if sa.value == sc.value:
        raise Retry("same start")
    (first, fe), (second, se) = sorted([(sa, a), (sc, c)], key=lambda t: t[0].value)
    value = (second.value - first.value).days
    b.tool(
        "days_between_dates",
        f"How many days are there from {fmt(first.value)} to {fmt(second.value)}?",
        value,
        [first.node, second.node],
        lambda k: k.args(first.value, second.value, False),
    )
    return Task(f"How many days after the start of {fe.display} does {se.display} start?", value, "days")


def _percentage(b: Builder, part: _Measure, whole: _Measure) -> Value:
    value = round_half_up(exact(part.value) / exact(whole.value) * 100, 2)
    b.tool(
        "calculate_percentage",
        f"What percentage of {fmt(whole.value)} is {fmt(part.value)}?",
        value,
        [part.node, whole.node],
        lambda k: k.args(part.value, whole.value),
    )
    return value


def p_share(b: Builder, depth: int) -> Task:
    """The share of a country's population living in one of its cities: named (two hops), or
    reached by a relation (its capital, its most populous city)."""
    pop_country, pop_city = b.vocab.attr(COUNTRY, "population"), b.vocab.attr(CITY, "population")
    to_city = [r for r in b.vocab.rels_from(COUNTRY) if r.target == CITY]
    if depth == 2:
        country = b.root((COUNTRY,))
        city = Ent(CITY, b.rng.choice([c.name for c in b.world.cities.values() if c.country == country.name]))
        whole, part = b.measure(country, pop_country, None), b.measure(city, pop_city, None)
        value = _percentage(b, part, whole)
        return Task(f"What percentage of the population of {country.name} lives in {city.name}?", value, "%")
    root, rels = b.side(depth - 3, lambda e: e.etype == COUNTRY, None)
    country, last = b.chain(root, rels)
    rel = b.rng.choice(to_city)
    whole = b.measure(country, pop_country, last)
    city, link = b.chain(country, [rel], last)
    part = b.measure(city, pop_city, link)
    value = _percentage(b, part, whole)
    where = rel.link.np.format(x="the country")
    return Task(f"What percentage of the population of {_phrase(root, rels)} lives in {where}?", value, "%")


def p_margin(b: Builder, depth: int) -> Task:
    """A company's operating or net margin in one fiscal year: income as a percentage of revenue."""
    root, rels = b.side(depth - 2, lambda e: e.etype == COMPANY, None)
    end, last = b.chain(root, rels)
    metric = b.rng.choice(["operating_income", "net_income"])
    year = b.rng.choice(FISCAL_YEARS)
    income = b.measure(end, b.vocab.attr(COMPANY, metric), last, year)
    revenue = b.measure(end, b.vocab.attr(COMPANY, "revenue"), last, year)
    value = _percentage(b, income, revenue)
    words = metric.split("_")[0]
    return Task(f"What was the {words} margin of {_phrase(root, rels)} in fiscal year {year}, in percent?", value, "%")


def p_rate(b: Builder, depth: int) -> Task:
    """The exchange rate between the currencies of two countries, each reached by a branch."""
    w1, w2 = depth - 2, b.rng.randint(0, depth - 2)
    r1, rels1 = b.side(w1, lambda e: e.etype == COUNTRY, None)
    r2, rels2 = b.side(w2, lambda e: e.etype == COUNTRY, ANY_ROOT if w2 else (COUNTRY,), avoid={r1})
    if b.walk_end(r1, rels1) == b.walk_end(r2, rels2):
        raise Retry("same country")
    (e1, n1), (e2, n2) = b.chain(r1, rels1), b.chain(r2, rels2)
    codes, nodes = [], []
    for end, last in ((e1, n1), (e2, n2)):
        code = b.world.countries[end.name].currency
        nodes.append(
            b.tool(
                "country",
                f"Which currency does {end.name} use?",
                code,
                [last] if last else [],
                lambda k, e=end: k.args(e.name, "currency"),
            )
        )
        codes.append(code)
    base, quote = codes
    rates = b.world.usd_per_unit
    value = round_half_up(exact(rates[base]) / exact(rates[quote]), 6)
    b.tool(
        "exchange_rate",
        f"What is the exchange rate from {base} to {quote}?",
        value,
        nodes,
        lambda k: k.args(base, quote),
    )
    question = f"How many units of the currency of {_phrase(r2, rels2)} does one unit of the currency of {_phrase(r1, rels1)} buy?"
    return Task(_cap(question), value, f"{quote} per {base}")


def p_compare(b: Builder, depth: int) -> Task:
    """Which of two or three entities, each reached by a branch of relations, has the most or
    least of an attribute: a comparison whose candidates the question does not name."""
    w0 = depth - 1  # the measurement is one more hop
    ws = [w0] + [b.rng.randint(0, w0) for _ in range(b.rng.choice([1, 1, 2]))]
    etypes = [e for e in ANY_ROOT if b.attrs(e, need=lambda a: a.ask.cmp is not None)]
    etype = b.rng.choice(etypes)
    attr = b.rng.choice(b.attrs(etype, need=lambda a: a.ask.cmp is not None))
    param = b.param_for(attr)
    sides, ends = [], set()
    for i, w in enumerate(ws):
        roots = (etype,) if w == 0 else (None if i == 0 else ANY_ROOT)
        root, rels = b.side(w, lambda e: e.etype == etype, roots, avoid=ends)
        end = b.walk_end(root, rels)
        if end in ends:
            raise Retry("repeated entity")
        ends.add(end)
        sides.append((root, rels))
    measures, phrases, reached = [], [], []
    for root, rels in sides:
        end, last = b.chain(root, rels)
        measures.append(b.measure(end, attr, last, param))
        phrases.append(_phrase(root, rels))
        reached.append(end)
    return _compare(b, phrases, reached, attr, measures, param)


DOMAINS: dict[str, Domain] = {
    d.name: d
    for d in [
        Domain("geography", (CITY, COUNTRY), (p_distance, p_percent, p_density, p_aggregate, p_share, p_compare)),
        Domain(
            "finance", (COMPANY,), (p_growth, p_percent, p_distance, p_aggregate, p_fx, p_margin, p_rate, p_compare)
        ),
        Domain("people", (PERSON,), (p_distance, p_fx, p_growth, p_rate, p_compare)),
        Domain("retail", (PRODUCT,), (p_fx, p_growth, p_distance, p_compare), open_branches=True),
        Domain(
            "climate", (CITY, COUNTRY, EVENT, PERSON, COMPANY), (p_aggregate, p_temp_range, p_compare), climate=True
        ),
        Domain("events", (EVENT,), (p_duration, p_distance, p_compare)),
    ]
}
