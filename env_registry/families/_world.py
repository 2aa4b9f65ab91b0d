"""A synthetic world for one procedural environment: countries, cities, companies, people,
products, events, road distances and exchange rates, drawn from a seeded RNG.

Names are invented (syllables) so a policy cannot answer from memory and must call the tools.
Every relation a record states is total (each city has a country, each company a headquarters
and a CEO, ...) so any walk over them can be answered; the relations found by listing (a city's
first event, a company's product) may be missing, and walks skip them there. Few-valued text
answers are avoided where they would let a call about the wrong entity answer by luck:
occupations and sectors are unique within a world; makers, headquarters, home cities and host
cities are dealt round a shuffled list (`_Dealer`), so they repeat only when the records outnumber
the choices. Numbers are exact (`int`, `Decimal`, `date`): the task builder derives answers from
them with exact arithmetic.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

# Mostly single consonants and open syllables: pronounceable, varied, rarely clashing.
_ONSETS = "b c d f g h k l m n p r s t v z b d k l m n r s t v".split() + "br dr gr kr st tr".split()
_VOWELS = "a e i o u a e i o a ai ei ou".split()
_CODAS = [""] * 8 + ["n", "r", "l", "s", "m", "th"]
_CITY_SUFFIX = "holm ford stead mere ton vik burg wick port dale haven field gard mouth".split()
_COUNTRY_SUFFIX = "ia ania ora land esh eth avia ica".split()
_LANGUAGE_SUFFIX = "ish ese ic an i".split()
_SURNAME_SUFFIX = ["", "", "son", "ard", "ley", "ova", "ez", "berg"]
_COMPANY_KIND = [
    ("Dynamics", "industrial machinery"),
    ("Holdings", "conglomerate"),
    ("Labs", "software"),
    ("Foods", "food processing"),
    ("Motors", "automotive"),
    ("Logistics", "freight and logistics"),
    ("Energy", "renewable energy"),
    ("Textiles", "textiles"),
    ("Pharma", "pharmaceuticals"),
    ("Robotics", "robotics"),
    ("Telecom", "telecommunications"),
    ("Shipyards", "shipbuilding"),
]
_PRODUCT_MODEL = ["X2", "Pro 7", "Mini", "S400", "Air", "Max 3", "One", "Lite 5", "Ultra", "Neo 9"]
_PRODUCT_CATEGORY = ["e-bike", "espresso machine", "drone", "smartwatch", "tent", "drill", "kayak", "speaker"]
_EVENT_THEME = ["Lantern", "Jazz", "Film", "Book", "Harvest", "Robotics", "Kite", "Glass", "Chess", "Folk"]
_EVENT_KIND = ["Festival", "Fair", "Week", "Expo"]
# Occupations are drawn without replacement, so no two people of a world share one: a text
# answer with few distinct values would let a call about the wrong person answer by luck.
_OCCUPATION = (
    "architect economist surgeon pilot chemist journalist engineer teacher geologist pharmacist "
    "translator carpenter veterinarian librarian statistician photographer electrician nurse "
    "lawyer accountant botanist cartographer chef dentist firefighter historian mathematician "
    "optician paramedic sculptor surveyor welder astronomer baker curator midwife"
).split()
_CURRENCY_UNIT = ["crown", "mark", "florin", "dinar", "talon", "real", "thaler"]
MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
FISCAL_YEARS = [2021, 2022, 2023, 2024]


@dataclass
class Country:
    name: str
    capital: str
    currency: str  # ISO-like code
    currency_name: str
    population: int
    area_km2: int
    official_language: str


@dataclass
class City:
    name: str
    country: str
    population: int
    founded_year: int
    elevation_m: int
    temps_c: dict[str, Decimal]  # month -> average temperature, one decimal
    precip_mm: dict[str, int]


@dataclass
class Company:
    name: str
    ticker: str
    hq_city: str
    ceo: str
    founded_year: int
    employees: int
    sector: str
    currency: str
    share_price: Decimal
    exchange: str
    financials: dict[int, dict[str, Decimal]]  # fiscal year -> metric -> millions, one decimal


@dataclass
class Person:
    name: str
    birth_date: dt.date
    home_city: str
    employer: str
    occupation: str


@dataclass
class Product:
    name: str
    maker: str
    price: Decimal  # in `currency`, two decimals
    currency: str
    weight_kg: Decimal
    category: str
    sku: str


@dataclass
class Event:
    name: str
    city: str
    start_date: dt.date
    end_date: dt.date
    category: str


@dataclass
class World:
    countries: dict[str, Country] = field(default_factory=dict)
    cities: dict[str, City] = field(default_factory=dict)
    companies: dict[str, Company] = field(default_factory=dict)
    people: dict[str, Person] = field(default_factory=dict)
    products: dict[str, Product] = field(default_factory=dict)
    events: dict[str, Event] = field(default_factory=dict)
    distances_km: dict[frozenset[str], int] = field(default_factory=dict)
    usd_per_unit: dict[str, Decimal] = field(default_factory=dict)
    brands: dict[str, str] = field(default_factory=dict)  # data provider per service, e.g. "atlas" -> "Veltra"

    def distance(self, a: str, b: str) -> int:
        return self.distances_km[frozenset((a, b))]

    def tickers(self) -> dict[str, Company]:
        return {c.ticker: c for c in self.companies.values()}


@dataclass(frozen=True)
class EntityType:
    """A kind of thing in the world: where its records are and how a question names one."""

    key: str
    records: Callable[[World], Mapping[str, Any]] = field(compare=False, repr=False)  # name -> record
    article: bool = False  # named with "the" in questions: "the Zentra X2"

    def display(self, name: str) -> str:
        return f"the {name}" if self.article else name


CITY = EntityType("city", lambda w: w.cities)
COUNTRY = EntityType("country", lambda w: w.countries)
COMPANY = EntityType("company", lambda w: w.companies)
TICKER = EntityType("ticker", World.tickers)  # a listed company, named by its ticker symbol
PERSON = EntityType("person", lambda w: w.people)
PRODUCT = EntityType("product", lambda w: w.products, article=True)
EVENT = EntityType("event", lambda w: w.events, article=True)
ENTITY_TYPES = (CITY, COUNTRY, COMPANY, TICKER, PERSON, PRODUCT, EVENT)


class _Names:
    """Invented words, each used once per world, so no name is a whole word of another and a
    text answer never matches the wrong entity."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def word(self, syllables: int = 2, suffixes: list[str] | None = None, strip_vowel: bool = False) -> str:
        r = self.rng
        for _ in range(1000):
            w = "".join(r.choice(_ONSETS) + r.choice(_VOWELS) + r.choice(_CODAS) for _ in range(syllables))
            if strip_vowel:
                w = w.rstrip("aeiou")
            w = (w + (r.choice(suffixes) if suffixes else "")).capitalize()
            if 3 <= len(w) <= 16 and w.casefold() not in self.used:
                self.used.add(w.casefold())
                return w
        raise RuntimeError("name space exhausted")  # unreachable with these sizes

    def city(self) -> str:
        return self.word(self.rng.randint(1, 2), _CITY_SUFFIX)

    def country(self) -> str:
        return self.word(2, _COUNTRY_SUFFIX, strip_vowel=True)

    def person(self) -> str:
        return f"{self.word(self.rng.randint(1, 2))} {self.word(2, _SURNAME_SUFFIX)}"


class _Dealer:
    """Names dealt round a shuffled list: a value repeats only once every name has been dealt, so
    "the X of A" rarely equals "the X of B" and a call about the wrong record answers by luck less
    often than with independent draws."""

    def __init__(self, rng: random.Random, names: list[str]):
        self.rng, self.names, self.left = rng, names, []

    def deal(self) -> str:
        if not self.left:
            self.left = self.rng.sample(self.names, len(self.names))
        return self.left.pop()


def _money(rng: random.Random, lo: float, hi: float) -> Decimal:
    return Decimal(f"{rng.uniform(lo, hi):.2f}")


def build_world(rng: random.Random) -> World:
    names = _Names(rng)
    w = World()
    for service in ("atlas", "markets", "registry", "catalog", "events", "weather"):
        w.brands[service] = names.word(2)
    for step in (_countries, _cities, _distances, _companies, _people, _products, _events):
        step(w, rng, names)
    return w


def _countries(w: World, rng: random.Random, names: _Names) -> None:
    codes: set[str] = {"USD"}
    # Six to eight countries of one to three cities: "the country of a city" is shared with
    # about one other city in twelve, where four to six countries of two or three cities shared
    # it with one in seven.
    for _ in range(rng.randint(6, 8)):
        cname = names.country()
        code = cname[:2].upper() + rng.choice("ABDFGKLMNRSTVXZ")
        while code in codes:
            code = cname[0].upper() + "".join(rng.choice("ABCDEFGHJKLMNPRSTVWXZ") for _ in range(2))
        codes.add(code)
        w.countries[cname] = Country(
            name=cname,
            capital="",
            currency=code,
            currency_name=f"{cname} {rng.choice(_CURRENCY_UNIT)}",
            population=rng.randint(1_500_000, 90_000_000),
            area_km2=rng.randint(20_000, 900_000),
            official_language=names.word(2, _LANGUAGE_SUFFIX, strip_vowel=True),
        )
        w.usd_per_unit[code] = Decimal(f"{rng.uniform(0.02, 2.5):.4f}")
    w.usd_per_unit["USD"] = Decimal("1")


def _cities(w: World, rng: random.Random, names: _Names) -> None:
    for country in w.countries.values():
        for _ in range(rng.randint(1, 3)):
            mean = rng.uniform(-4, 22)
            amp = rng.uniform(3, 14)
            warmest = 6 if rng.random() < 0.8 else 0  # July in the north, January in the south
            temps = {
                m: Decimal(f"{mean + amp * math.cos(2 * math.pi * (i - warmest) / 12) + rng.uniform(-1, 1):.1f}")
                for i, m in enumerate(MONTHS)
            }
            city = City(
                name=names.city(),
                country=country.name,
                population=rng.randint(40_000, 4_000_000),
                founded_year=rng.randint(900, 1950),
                elevation_m=rng.randint(2, 2400),
                temps_c=temps,
                precip_mm={m: rng.randint(5, 220) for m in MONTHS},
            )
            w.cities[city.name] = city
        country.capital = rng.choice([c.name for c in w.cities.values() if c.country == country.name])


def _distances(w: World, rng: random.Random, names: _Names) -> None:
    city_names = list(w.cities)
    for i, a in enumerate(city_names):
        for b in city_names[i + 1 :]:
            same = w.cities[a].country == w.cities[b].country
            w.distances_km[frozenset((a, b))] = rng.randint(20, 900) if same else rng.randint(300, 6000)


def _companies(w: World, rng: random.Random, names: _Names) -> None:
    tickers: set[str] = set()
    kinds = rng.sample(_COMPANY_KIND, rng.randint(6, 8))  # one company per sector
    headquarters = _Dealer(rng, list(w.cities))
    for suffix, sector in kinds:
        cname = f"{names.word(2)} {suffix}"
        ticker = "".join(ch for ch in cname.upper() if ch.isalpha())[:3]
        while ticker in tickers:
            ticker = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(4))
        tickers.add(ticker)
        hq = headquarters.deal()
        w.companies[cname] = Company(
            name=cname,
            ticker=ticker,
            hq_city=hq,
            ceo="",
            founded_year=rng.randint(1850, 2015),
            employees=rng.randint(120, 250_000),
            sector=sector,
            currency=w.countries[w.cities[hq].country].currency,
            share_price=_money(rng, 4, 900),
            exchange=f"{w.brands['markets']} Exchange",
            financials=_financials(rng),
        )


def _financials(rng: random.Random) -> dict[int, dict[str, Decimal]]:
    revenue = Decimal(f"{rng.uniform(40, 9000):.1f}")
    financials: dict[int, dict[str, Decimal]] = {}
    for year in FISCAL_YEARS:
        # Revenue grows every year so growth questions have positive answers.
        op_margin = Decimal(f"{rng.uniform(0.05, 0.3):.3f}")
        operating = (revenue * op_margin).quantize(Decimal("0.1"))
        net = (operating * Decimal(f"{rng.uniform(0.5, 0.85):.3f}")).quantize(Decimal("0.1"))
        financials[year] = {"revenue": revenue, "operating_income": operating, "net_income": net}
        revenue = (revenue * Decimal(f"{rng.uniform(1.01, 1.35):.3f}")).quantize(Decimal("0.1"))
    return financials


def _people(w: World, rng: random.Random, names: _Names) -> None:
    occupations = list(_OCCUPATION)
    employers = list(w.companies) + [rng.choice(list(w.companies)) for _ in range(rng.randint(3, 5))]
    homes = _Dealer(rng, list(w.cities))
    for i, employer in enumerate(employers):
        person = Person(
            name=names.person(),
            birth_date=dt.date(1950, 1, 1) + dt.timedelta(days=rng.randint(0, 19000)),
            home_city=homes.deal(),
            employer=employer,
            occupation=occupations.pop(rng.randrange(len(occupations))),
        )
        w.people[person.name] = person
        if i < len(w.companies):  # the first person of each company leads it
            w.companies[employer].ceo = person.name


def _products(w: World, rng: random.Random, names: _Names) -> None:
    # Makers are dealt round a shuffled list of companies, so they repeat only when the products
    # outnumber the companies: "which company makes X" rarely shares its answer with another product.
    makers = rng.sample(list(w.companies), len(w.companies))
    for i in range(rng.randint(5, 7)):
        maker = makers[i % len(makers)]
        pname = f"{names.word(2)} {rng.choice(_PRODUCT_MODEL)}"
        w.products[pname] = Product(
            name=pname,
            maker=maker,
            price=_money(rng, 3, 2500),
            currency=w.companies[maker].currency,
            weight_kg=Decimal(f"{rng.uniform(0.1, 40):.2f}"),
            category=rng.choice(_PRODUCT_CATEGORY),
            sku=f"{pname[:3].upper()}-{rng.randint(1000, 9999)}",
        )


def _events(w: World, rng: random.Random, names: _Names) -> None:
    hosts = _Dealer(rng, list(w.cities))
    for _ in range(rng.randint(4, 6)):
        theme = rng.choice(_EVENT_THEME)
        ename = f"{names.word(2)} {theme} {rng.choice(_EVENT_KIND)}"
        start = dt.date(2025, 1, 1) + dt.timedelta(days=rng.randint(0, 700))
        w.events[ename] = Event(
            name=ename,
            city=hosts.deal(),
            start_date=start,
            end_date=start + dt.timedelta(days=rng.randint(1, 20)),
            category=theme.lower(),
        )
