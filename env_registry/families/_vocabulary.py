"""What the procedural family can ask, as data: each row carries its own behaviour.

- A `RecordTable` is one lookup tool's table (city, country, ..., stock quote): its fields in
  order, each with its documentation and, when questions use it, how it is asked (`Ask`: a
  measured value) or where it leads (`Link`: a relation to another entity). The tool's data rows,
  its schema and the question vocabulary all derive from this one list, so a new attribute of a
  record is one `Field`.
- `Attr` (a measured value) and `Rel` (one relation step) are what the task builders walk; most
  derive from the tables' fields, the rest answered by other tools (monthly temperatures, annual
  revenue, the most populous city) are written out with their reader and call arguments.
- `Post` is one more tool call transforming a measured value (unit and currency conversion,
  weekday, age), with its exact arithmetic and its arguments.

`Vocabulary.build()` reads the tables when a generation starts, so a table edited at run time
(a test adding a field) is what that generation asks.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import sympy

from env_registry.families._values import Value, exact, round_half_up
from env_registry.families._world import (
    CITY,
    COMPANY,
    COUNTRY,
    ENTITY_TYPES,
    EVENT,
    FISCAL_YEARS,
    MONTHS,
    PERSON,
    PRODUCT,
    TICKER,
    EntityType,
    World,
)
from env_registry.families.tool_templates.convert_units import LENGTH_M, MASS_KG

ToolArgs = dict[str, Any]


def convert_money(world: World, amount: Value, src: str, dst: str) -> Value:
    """`amount` of currency `src` in currency `dst` at the world's reference rates, to the cent."""
    r = world.usd_per_unit
    return round_half_up(exact(amount) * exact(r[src]) / exact(r[dst]), 2)


def _age(born: dt.date, on: dt.date) -> int:
    return on.year - born.year - ((on.month, on.day) < (born.month, born.day))


@dataclass(frozen=True)
class Measured:
    """A value a tool call measured, as a post-transform sees it."""

    value: Value
    unit: str
    param: Any  # the attribute's parameter (month, fiscal year) or the post's own (an age's date)


@dataclass(frozen=True)
class Post:
    """A transformation of a measured value by one more tool call."""

    key: str
    tool: str  # tool kind making the call
    main: str  # main question, {x} the entity phrase, {p} the parameter
    question: str  # concrete sub-question, {v} the value, {u} its unit, {p} the parameter
    unit: str  # unit of the result, for the final answer
    apply: Callable[[World, Measured], Value]
    args: Callable[[Any, Measured], ToolArgs]  # (tool kind, measured) -> call arguments
    draw: Callable[[random.Random], Any] | None = None  # its own parameter, drawn before measuring


def _by_factor(factor: str) -> Callable[[World, Measured], Value]:
    return lambda w, m: round_half_up(exact(m.value) / exact(factor), 2)


TO_FT = Post(
    "to_ft", "convert_units", "What is the elevation of {x} in feet?", "What is {v} metres in feet?", "ft",
    _by_factor(repr(LENGTH_M["ft"])), lambda k, m: k.args(m.value, "m", "ft"),
)  # fmt: skip
TO_F = Post(
    "to_f", "convert_units", "What is the average {p} temperature in {x}, in degrees Fahrenheit?",
    "What is {v} °C in degrees Fahrenheit?", "°F",
    lambda w, m: round_half_up(exact(m.value) * sympy.Rational(9, 5) + 32, 2),
    lambda k, m: k.args(m.value, "celsius", "fahrenheit"),
)  # fmt: skip
TO_LB = Post(
    "to_lb", "convert_units", "How much does {x} weigh in pounds?", "What is {v} kg in pounds?", "lb",
    _by_factor(repr(MASS_KG["lb"])), lambda k, m: k.args(m.value, "kg", "lb"),
)  # fmt: skip


def _to_usd(main: str) -> Post:
    return Post(
        "to_usd", "fx", main, "What is {v} {u} in USD?", "USD",
        lambda w, m: convert_money(w, m.value, m.unit, "USD"), lambda k, m: k.args(m.value, m.unit, "USD"),
    )  # fmt: skip


WEEKDAY = Post(
    "weekday", "get_day_of_week", "On what day of the week does {x} start?", "What day of the week is {v}?", "",
    lambda w, m: m.value.strftime("%A"), lambda k, m: k.args(m.value),
)  # fmt: skip
AGE = Post(
    "age", "calculate_age", "How old was {x} on {p}?", "How old is someone born on {v} on {p}?", "years",
    lambda w, m: _age(m.value, m.param), lambda k, m: k.args(m.value, m.param),
    draw=lambda rng: dt.date(rng.choice([2024, 2025]), rng.randint(1, 12), 1),
)  # fmt: skip


def _add_days(main: str) -> Post:
    return Post(
        "add_days", "add_days", main, "What date is {p} days after {v}?", "",
        lambda w, m: m.value + dt.timedelta(days=m.param), lambda k, m: k.args(m.value, m.param),
        draw=lambda rng: rng.choice([7, 10, 14, 30, 45, 60, 90, 100]),
    )  # fmt: skip


@dataclass(frozen=True)
class Ask:
    """How a measured value is asked about."""

    question: str  # {x} the entity phrase, {p} the parameter (month, fiscal year)
    np: str  # noun phrase for nesting: "the population of {x}"
    unit: str = ""
    cmp: tuple[str, str] | None = None  # (phrase for the max, phrase for the min)
    posts: tuple[Post, ...] = ()
    percent: bool = False  # "by what percentage is A's X greater than B's" makes sense
    stat: str | None = None  # statistic that makes sense across entities
    noun: str = ""  # short name for aggregate questions ("combined population of ...")
    unit_from: str | None = None  # the record field holding the unit (a price's currency)
    cmp_key: str | None = None  # attributes of other entity types with the same key compare with it


@dataclass(frozen=True)
class Link:
    """A field naming another entity: one relation step."""

    target: EntityType
    question: str  # concrete sub-question, {x} the entity
    np: str  # noun phrase for nesting: "the maker of {x}"
    step: str  # imperative step: "find the company that makes {x}"

    @property
    def ref(self) -> str:
        """How the next step refers to the result."""
        return f"that {self.target.key}"


@dataclass(frozen=True)
class Field:
    """One field of a record table."""

    name: str  # key in the tool's output and in its `fields` / `attribute` enum
    doc: str  # what the tool's schema says about it
    ask: Ask | None = None  # questions measure it
    link: Link | None = None  # questions walk along it
    attr: str = ""  # the record's attribute, when not `name`

    def read(self, record: Any) -> Any:
        return getattr(record, self.attr or self.name)


@dataclass(frozen=True)
class RecordTable:
    """One lookup tool's table: one record per entity of `etype`."""

    key: str  # tool kind
    etype: EntityType
    service: str  # the data provider (its brand names the tool)
    entity: str  # what one record is, in words
    param: str  # the argument naming the record
    label: str  # the output key holding the record's name
    plural: str  # the argument listing records, in a batch lookup
    fields: tuple[Field, ...]
    profile_names: tuple[str, ...]
    attribute_names: tuple[str, ...]
    summary: str  # with {title}

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


_F = Field  # the tables below read as tables

RECORD_TABLES: dict[str, RecordTable] = {
    t.key: t
    for t in [
        RecordTable(
            "city", CITY, "atlas", "city", "city", "city", "cities",
            (
                _F("country", "country the city belongs to", link=Link(
                    COUNTRY, "Which country is {x} in?", "the country of {x}", "find the country {x} is in")),
                _F("population", "number of inhabitants (latest census)", Ask(
                    "What is the population of {x}?", "the population of {x}",
                    cmp=("has the largest population", "has the smallest population"), percent=True, stat="sum",
                    noun="population")),
                _F("founded_year", "year the city was founded", Ask(
                    "In what year was {x} founded?", "the founding year of {x}",
                    cmp=("was founded most recently", "was founded earliest"), cmp_key="founded")),
                _F("elevation_m", "elevation above sea level, in metres", Ask(
                    "What is the elevation of {x} in metres?", "the elevation of {x}", unit="m",
                    cmp=("lies highest", "lies lowest"), posts=(TO_FT,), percent=True, stat="mean",
                    noun="elevation")),
            ),
            ("{p}_city_profile", "{p}_lookup_city"),
            ("{p}_get_city_attribute", "{p}_city_fact"),
            "Look up a city in the {title}: its country, population (latest census), founding year and "
            "elevation in metres. City names are matched case-insensitively.",
        ),
        RecordTable(
            "country", COUNTRY, "atlas", "country", "country", "country", "countries",
            (
                _F("capital", "capital city", link=Link(
                    CITY, "What is the capital of {x}?", "the capital of {x}", "find the capital of {x}")),
                _F("currency", "ISO-style code of the national currency"),
                _F("population", "number of inhabitants", Ask(
                    "What is the population of {x}?", "the population of {x}",
                    cmp=("has the largest population", "has the smallest population"), percent=True, stat="sum",
                    noun="population")),
                _F("area_km2", "land area in square kilometres", Ask(
                    "What is the land area of {x} in square kilometres?", "the land area of {x}", unit="km²",
                    cmp=("has the largest land area", "has the smallest land area"), percent=True, stat="sum",
                    noun="land area")),
                _F("official_language", "official language", Ask(
                    "What is the official language of {x}?", "the official language of {x}")),
            ),
            ("{p}_country_profile", "{p}_lookup_country"),
            ("{p}_get_country_attribute",),
            "Get national statistics for a country from the {title}: capital, currency code, population, "
            "land area (km²) and official language.",
        ),
        RecordTable(
            "company", COMPANY, "markets", "company", "company", "company", "companies",
            (
                _F("ticker", "stock ticker symbol", link=Link(
                    TICKER, "What is the stock ticker of {x}?", "the stock ticker of {x}",
                    "find the stock ticker of {x}")),
                _F("hq_city", "city where the company is headquartered", link=Link(
                    CITY, "In which city is {x} headquartered?", "the headquarters city of {x}",
                    "find the city where {x} is headquartered")),
                _F("ceo", "current chief executive officer", link=Link(
                    PERSON, "Who is the CEO of {x}?", "the CEO of {x}", "find the CEO of {x}")),
                _F("founded_year", "year the company was founded", Ask(
                    "In what year was {x} founded?", "the founding year of {x}",
                    cmp=("was founded most recently", "was founded earliest"), cmp_key="founded")),
                _F("employees", "number of employees", Ask(
                    "How many employees does {x} have?", "the headcount of {x}",
                    cmp=("has the most employees", "has the fewest employees"), percent=True, stat="sum",
                    noun="headcount")),
                _F("sector", "business sector", Ask(
                    "In which business sector does {x} operate?", "the sector of {x}")),
            ),
            ("{p}_company_profile", "{p}_lookup_company"),
            ("{p}_get_company_attribute",),
            "Retrieve a company's corporate profile from {title}: ticker, headquarters city, CEO, founding "
            "year, headcount and sector.",
        ),
        RecordTable(
            "person", PERSON, "registry", "person", "name", "name", "names",
            (
                _F("birth_date", "date of birth (YYYY-MM-DD)", Ask(
                    "What is the date of birth of {x}?", "the date of birth of {x}",
                    cmp=("is the youngest", "is the oldest"), posts=(AGE,))),
                _F("home_city", "city of residence", link=Link(
                    CITY, "In which city does {x} live?", "the home city of {x}", "find the city {x} lives in")),
                _F("employer", "current employer", link=Link(
                    COMPANY, "Which company does {x} work for?", "the employer of {x}",
                    "find the company {x} works for")),
                _F("occupation", "occupation", Ask("What is the occupation of {x}?", "the occupation of {x}")),
            ),
            ("{p}_person_profile", "{p}_lookup_person"),
            ("{p}_get_person_attribute",),
            "Look up a person by full name in the {title}: date of birth, city of residence, employer and "
            "occupation.",
        ),
        RecordTable(
            "product", PRODUCT, "catalog", "product", "product", "product", "products",
            (
                _F("maker", "company that manufactures the product", link=Link(
                    COMPANY, "Which company makes {x}?", "the maker of {x}", "find the company that makes {x}")),
                _F("price", "list price in the maker's currency", Ask(
                    "What is the list price of {x}?", "the list price of {x}",
                    posts=(_to_usd("What does {x} cost in US dollars?"),), unit_from="currency")),
                _F("currency", "currency code of the list price"),
                _F("weight_kg", "shipping weight in kilograms", Ask(
                    "How much does {x} weigh in kilograms?", "the weight of {x}", unit="kg",
                    cmp=("is the heaviest", "is the lightest"), posts=(TO_LB,), percent=True)),
                _F("category", "product category"),
                _F("sku", "stock keeping unit"),
            ),
            ("{p}_product_details", "{p}_lookup_product"),
            ("{p}_get_product_attribute",),
            "Fetch a product listing from the {title}: manufacturer, list price and its currency, weight in "
            "kg, category and SKU.",
        ),
        RecordTable(
            "event", EVENT, "events", "event", "event", "event", "events",
            (
                _F("city", "host city", link=Link(
                    CITY, "In which city is {x} held?", "the host city of {x}", "find the city hosting {x}")),
                _F("start_date", "first day (YYYY-MM-DD)", Ask(
                    "On what date does {x} start?", "the start date of {x}", cmp=("starts latest", "starts earliest"),
                    posts=(WEEKDAY, _add_days("What date is {p} days after the start of {x}?")))),
                _F("end_date", "last day (YYYY-MM-DD)", Ask(
                    "On what date does {x} end?", "the end date of {x}",
                    posts=(_add_days("What date is {p} days after the end of {x}?"),))),
                _F("category", "event category"),
            ),
            ("{p}_event_details", "{p}_lookup_event"),
            ("{p}_get_event_attribute",),
            "Get schedule details of a public event from the {title}: host city, first and last day, and "
            "category.",
        ),
        RecordTable(
            "stock", TICKER, "markets", "listed stock", "ticker", "ticker", "tickers",
            (
                _F("company", "issuing company", attr="name"),
                _F("price", "last traded share price", Ask(
                    "What is the last traded share price of {x}?", "the share price of {x}",
                    posts=(_to_usd("What is the share price of {x} in US dollars?"),), unit_from="currency"),
                    attr="share_price"),
                _F("currency", "trading currency code"),
                _F("exchange", "exchange the stock trades on"),
            ),
            ("{p}_stock_quote", "{p}_get_share_price"),
            (),
            "Get the latest stock quote for a ticker symbol from {title}: last traded price, currency and "
            "exchange.",
        ),
    ]
}  # fmt: skip


@dataclass(frozen=True)
class Attr:
    """A measured value of an entity, answered by one call of `tool`."""

    etype: EntityType
    key: str
    tool: str  # tool kind answering it
    ask: Ask
    read: Callable[[World, str, Any], Value]  # (world, entity name, parameter) -> value
    args: Callable[[Any, str, Any], ToolArgs]  # (tool kind, entity name, parameter) -> call arguments
    unit_of: Callable[[World, str], str] | None = None  # the unit when it depends on the record
    draw: Callable[[random.Random], Any] | None = None  # its parameter (month, fiscal year)
    climate: bool = False  # asked in the climate domain (and only there)

    def unit(self, world: World, name: str) -> str:
        return self.unit_of(world, name) if self.unit_of else self.ask.unit


@dataclass(frozen=True)
class Rel:
    """One relation step from an entity of `source` to one of `link.target`, by one call of `tool`."""

    source: EntityType
    key: str
    tool: str
    link: Link
    resolve: Callable[[World, str], str | None]  # (world, entity name) -> the target's name, None: no such
    args: Callable[[Any, str], ToolArgs]  # (tool kind, entity name) -> call arguments

    @property
    def target(self) -> EntityType:
        return self.link.target


def _field_attr(table: RecordTable, f: Field) -> Attr:
    def read(w: World, name: str, param: Any) -> Value:
        return f.read(table.etype.records(w)[name])

    def unit_of(w: World, name: str) -> str:
        return getattr(table.etype.records(w)[name], f.ask.unit_from)

    return Attr(
        table.etype, f.name, table.key, f.ask, read, lambda k, name, p: k.args(name, f.name),
        unit_of if f.ask.unit_from else None,
    )  # fmt: skip


def _field_rel(table: RecordTable, f: Field) -> Rel:
    def resolve(w: World, name: str) -> str:
        return f.read(table.etype.records(w)[name])

    return Rel(table.etype, f.name, table.key, f.link, resolve, lambda k, name: k.args(name, f.name))


def _largest_city(w: World, country: str) -> str:
    return max((c for c in w.cities.values() if c.country == country), key=lambda c: c.population).name


def _first_event(w: World, city: str) -> str | None:
    """The event a city hosts first; None when it hosts none, or two start the same day."""
    starts = sorted((e.start_date, e.name) for e in w.events.values() if e.city == city)
    if not starts or len(starts) > 1 and starts[0][0] == starts[1][0]:
        return None
    return starts[0][1]


def _only_product(w: World, company: str) -> str | None:
    """The product a company makes; None unless it makes exactly one."""
    made = [p.name for p in w.products.values() if p.maker == company]
    return made[0] if len(made) == 1 else None


# Measured values and relations answered by tools other than the record lookups.
EXTRA_ATTRS = (
    Attr(
        CITY, "temp", "climate",
        Ask("What is the average {p} temperature in {x}, in °C?", "the average {p} temperature in {x}", unit="°C",
            cmp=("is warmest in {p}", "is coldest in {p}"), posts=(TO_F,), stat="mean", noun="{p} temperature"),
        lambda w, name, month: w.cities[name].temps_c[month], lambda k, name, month: k.args(name, month),
        draw=lambda rng: rng.choice(MONTHS), climate=True,
    ),
    Attr(
        CITY, "precip", "climate",
        Ask("What is the average {p} precipitation in {x}, in mm?", "the average {p} precipitation in {x}", unit="mm",
            cmp=("gets the most precipitation in {p}", "gets the least precipitation in {p}"), stat="mean",
            noun="{p} precipitation"),
        lambda w, name, month: w.cities[name].precip_mm[month], lambda k, name, month: k.args(name, month),
        draw=lambda rng: rng.choice(MONTHS), climate=True,
    ),
    *(
        Attr(
            COMPANY, metric, "financials",
            Ask(f"What was the {words} of {{x}} in fiscal year {{p}}, in millions?", f"the fiscal {{p}} {words} of {{x}}",
                unit="million"),
            lambda w, name, year, metric=metric: w.companies[name].financials[year][metric],
            lambda k, name, year, metric=metric: k.args(name, year, metric),
            unit_of=lambda w, name: f"million {w.companies[name].currency}",
            draw=lambda rng: rng.choice(FISCAL_YEARS),
        )
        for metric, words in (("revenue", "revenue"), ("operating_income", "operating income"),
                              ("net_income", "net income"))
    ),
)  # fmt: skip
EXTRA_RELS = (
    Rel(
        COUNTRY, "largest_city", "list_cities",
        Link(CITY, "What is the most populous city of {x}?", "the most populous city of {x}",
             "find the most populous city of {x}"),
        _largest_city, lambda k, name: k.args(name),
    ),
    Rel(
        CITY, "first_event", "events_in_city",
        Link(EVENT, "Which event held in {x} starts first?", "the first event held in {x}",
             "find the event held in {x} that starts first"),
        _first_event, lambda k, name: k.args(name),
    ),
    Rel(
        COMPANY, "product", "catalog_search",
        Link(PRODUCT, "Which product does {x} make?", "the product made by {x}", "find the product {x} makes"),
        _only_product, lambda k, name: k.args(name),
    ),
)  # fmt: skip


@dataclass(frozen=True)
class Vocabulary:
    """The attributes and relations of one generation run, by entity type."""

    attrs_by_type: Mapping[EntityType, tuple[Attr, ...]]
    rels_by_type: Mapping[EntityType, tuple[Rel, ...]]
    all_attrs: tuple[Attr, ...]  # by entity type, in `ENTITY_TYPES` order

    @classmethod
    def build(cls) -> Vocabulary:
        attrs = [_field_attr(t, f) for t in RECORD_TABLES.values() for f in t.fields if f.ask] + list(EXTRA_ATTRS)
        rels = [_field_rel(t, f) for t in RECORD_TABLES.values() for f in t.fields if f.link] + list(EXTRA_RELS)
        by_attr = {e: tuple(a for a in attrs if a.etype == e) for e in ENTITY_TYPES}
        by_rel = {e: tuple(r for r in rels if r.source == e) for e in ENTITY_TYPES}
        return cls(by_attr, by_rel, tuple(a for e in ENTITY_TYPES for a in by_attr[e]))

    def attrs_of(self, etype: EntityType) -> tuple[Attr, ...]:
        return self.attrs_by_type.get(etype, ())

    def rels_from(self, etype: EntityType) -> tuple[Rel, ...]:
        return self.rels_by_type.get(etype, ())

    def attr(self, etype: EntityType, key: str) -> Attr:
        return next(a for a in self.attrs_of(etype) if a.key == key)
