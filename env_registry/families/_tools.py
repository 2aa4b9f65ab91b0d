"""Tool kinds of the procedural family: each renders one ASTRA-style tool (OpenAI schema,
documentation, standard-library Python source with the world's mock data inside) and builds the
arguments of its golden calls.

Two sorts:
- data tools serve one world's records; their names carry the world's data-provider brand
  (`veltra_city_profile`), so two environments never hold same-named tools that differ;
- pure tools (unit conversion, date arithmetic, statistics) hold no data; they are byte-identical
  in every environment, so a same-named tool from another environment means the same thing.

The sources are what an LLM-written ASTRA tool looks like: typed signature, docstring,
defensive argument checks with messages a model can act on, case-insensitive lookup with
"did you mean" hints. They are rendered from `string.Template`s (no braces to escape).
"""

from __future__ import annotations

import datetime as dt
import pprint
import random
from dataclasses import dataclass
from decimal import Decimal
from string import Template
from typing import Any

from env_registry.families._world import FISCAL_YEARS, MONTHS, World


@dataclass(frozen=True)
class ToolDraft:
    name: str
    description: str
    parameters: dict[str, Any]
    source: str


def _literal(value: Any) -> str:
    return pprint.pformat(value, width=110, sort_dicts=False)


def _plain(value: Any) -> Any:
    """World values as JSON-able literals embedded in tool source."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() and value.as_tuple().exponent >= 0 else float(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


_SERVICE_TITLE = {
    "atlas": "{brand} Atlas",
    "markets": "{brand} Markets",
    "registry": "{brand} People Registry",
    "catalog": "{brand} Product Catalog",
    "events": "{brand} Events Guide",
    "weather": "{brand} Climate Service",
}


class ToolKind:
    """One tool of one environment. `key` names the kind; `name` is the rendered tool name."""

    key: str = ""

    def __init__(self, world: World, rng: random.Random):
        self.world = world
        self.rng = rng
        self.name = ""

    def draft(self) -> ToolDraft:
        raise NotImplementedError

    def _title(self, service: str) -> str:
        return _SERVICE_TITLE[service].format(brand=self.world.brands[service])

    def _prefix(self, service: str) -> str:
        return self.world.brands[service].lower()


# -- record lookups (city, country, company, person, product, event, stock quote) ----------

_FIND = Template("""import difflib

_RECORDS = $records

_FIELDS = $fields


def _find(value):
    if not isinstance(value, str) or not value.strip():
        raise ValueError("'$param' must be a non-empty string, for example $example")
    key = " ".join(value.split()).casefold()
    if key in _RECORDS:
        return _RECORDS[key]
    close = difflib.get_close_matches(key, list(_RECORDS), n=3, cutoff=0.6)
    hint = (" Did you mean: " + ", ".join(_RECORDS[k]["$label"] for k in close) + "?") if close else ""
    raise ValueError(f"No $entity named {value!r} in the $title.{hint}")
""")

_PROFILE = Template('''

def $name($param: str, fields: list | None = None) -> dict:
    """$summary

    Returns a dict with the $entity's name and the requested fields (all fields when
    `fields` is omitted).
    """
    record = _find($param)
    if fields is None:
        fields = list(_FIELDS)
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) for f in fields):
        raise ValueError("'fields' must be a non-empty list of field names: " + ", ".join(_FIELDS))
    unknown = [f for f in fields if f not in _FIELDS]
    if unknown:
        raise ValueError(f"Unknown field(s) {unknown}; available fields: {', '.join(_FIELDS)}")
    result = {"$label": record["$label"]}
    for f in fields:
        result[f] = record[f]
    return result
''')

_ATTRIBUTE = Template('''

def $name($param: str, attribute: str) -> dict:
    """$summary

    Returns {"$label": ..., "attribute": ..., "value": ...}.
    """
    record = _find($param)
    if not isinstance(attribute, str) or attribute.strip().lower() not in _FIELDS:
        raise ValueError(f"'attribute' must be one of: {', '.join(_FIELDS)}; got {attribute!r}")
    attribute = attribute.strip().lower()
    return {"$label": record["$label"], "attribute": attribute, "value": record[attribute]}
''')


@dataclass(frozen=True)
class RecordTable:
    key: str
    service: str
    entity: str  # what one record is, in words
    param: str  # the argument naming the record
    label: str  # the output key holding the record's name
    example_of: str  # which world dict supplies the example value
    fields: dict[str, str]  # field -> documentation
    profile_names: tuple[str, ...]
    attribute_names: tuple[str, ...]
    summary: str  # with {title}


RECORD_TABLES = {
    t.key: t
    for t in [
        RecordTable(
            "city",
            "atlas",
            "city",
            "city",
            "city",
            "cities",
            {
                "country": "country the city belongs to",
                "population": "number of inhabitants (latest census)",
                "founded_year": "year the city was founded",
                "elevation_m": "elevation above sea level, in metres",
            },
            ("{p}_city_profile", "{p}_lookup_city"),
            ("{p}_get_city_attribute", "{p}_city_fact"),
            "Look up a city in the {title}: its country, population (latest census), founding year and "
            "elevation in metres. City names are matched case-insensitively.",
        ),
        RecordTable(
            "country",
            "atlas",
            "country",
            "country",
            "country",
            "countries",
            {
                "capital": "capital city",
                "currency": "ISO-style code of the national currency",
                "population": "number of inhabitants",
                "area_km2": "land area in square kilometres",
                "official_language": "official language",
            },
            ("{p}_country_profile", "{p}_lookup_country"),
            ("{p}_get_country_attribute",),
            "Get national statistics for a country from the {title}: capital, currency code, population, "
            "land area (km²) and official language.",
        ),
        RecordTable(
            "company",
            "markets",
            "company",
            "company",
            "company",
            "companies",
            {
                "ticker": "stock ticker symbol",
                "hq_city": "city where the company is headquartered",
                "ceo": "current chief executive officer",
                "founded_year": "year the company was founded",
                "employees": "number of employees",
                "sector": "business sector",
            },
            ("{p}_company_profile", "{p}_lookup_company"),
            ("{p}_get_company_attribute",),
            "Retrieve a company's corporate profile from {title}: ticker, headquarters city, CEO, founding "
            "year, headcount and sector.",
        ),
        RecordTable(
            "person",
            "registry",
            "person",
            "name",
            "name",
            "people",
            {
                "birth_date": "date of birth (YYYY-MM-DD)",
                "home_city": "city of residence",
                "employer": "current employer",
                "occupation": "occupation",
            },
            ("{p}_person_profile", "{p}_lookup_person"),
            ("{p}_get_person_attribute",),
            "Look up a person by full name in the {title}: date of birth, city of residence, employer and occupation.",
        ),
        RecordTable(
            "product",
            "catalog",
            "product",
            "product",
            "product",
            "products",
            {
                "maker": "company that manufactures the product",
                "price": "list price in the maker's currency",
                "currency": "currency code of the list price",
                "weight_kg": "shipping weight in kilograms",
                "category": "product category",
                "sku": "stock keeping unit",
            },
            ("{p}_product_details", "{p}_lookup_product"),
            ("{p}_get_product_attribute",),
            "Fetch a product listing from the {title}: manufacturer, list price and its currency, weight in "
            "kg, category and SKU.",
        ),
        RecordTable(
            "event",
            "events",
            "event",
            "event",
            "event",
            "events",
            {
                "city": "host city",
                "start_date": "first day (YYYY-MM-DD)",
                "end_date": "last day (YYYY-MM-DD)",
                "category": "event category",
            },
            ("{p}_event_details", "{p}_lookup_event"),
            ("{p}_get_event_attribute",),
            "Get schedule details of a public event from the {title}: host city, first and last day, and category.",
        ),
        RecordTable(
            "stock",
            "markets",
            "listed stock",
            "ticker",
            "ticker",
            "tickers",
            {
                "company": "issuing company",
                "price": "last traded share price",
                "currency": "trading currency code",
                "exchange": "exchange the stock trades on",
            },
            ("{p}_stock_quote", "{p}_get_share_price"),
            (),
            "Get the latest stock quote for a ticker symbol from {title}: last traded price, currency and exchange.",
        ),
    ]
}


def _rows(world: World, key: str) -> list[dict[str, Any]]:
    w = world
    if key == "city":
        return [
            {"city": c.name, "country": c.country, "population": c.population, "founded_year": c.founded_year,
             "elevation_m": c.elevation_m}
            for c in w.cities.values()
        ]  # fmt: skip
    if key == "country":
        return [
            {"country": c.name, "capital": c.capital, "currency": c.currency, "population": c.population,
             "area_km2": c.area_km2, "official_language": c.official_language}
            for c in w.countries.values()
        ]  # fmt: skip
    if key == "company":
        return [
            {"company": c.name, "ticker": c.ticker, "hq_city": c.hq_city, "ceo": c.ceo,
             "founded_year": c.founded_year, "employees": c.employees, "sector": c.sector}
            for c in w.companies.values()
        ]  # fmt: skip
    if key == "person":
        return [
            {"name": p.name, "birth_date": p.birth_date.isoformat(), "home_city": p.home_city,
             "employer": p.employer, "occupation": p.occupation}
            for p in w.people.values()
        ]  # fmt: skip
    if key == "product":
        return [
            {"product": p.name, "maker": p.maker, "price": _plain(p.price), "currency": p.currency,
             "weight_kg": _plain(p.weight_kg), "category": p.category, "sku": p.sku}
            for p in w.products.values()
        ]  # fmt: skip
    if key == "event":
        return [
            {"event": e.name, "city": e.city, "start_date": e.start_date.isoformat(),
             "end_date": e.end_date.isoformat(), "category": e.category}
            for e in w.events.values()
        ]  # fmt: skip
    if key == "stock":
        return [
            {"ticker": c.ticker, "company": c.name, "price": _plain(c.share_price), "currency": c.currency,
             "exchange": c.exchange}
            for c in w.companies.values()
        ]  # fmt: skip
    raise KeyError(key)


class RecordKind(ToolKind):
    """A lookup over one table of the world, in one of two API styles: a profile (optional
    `fields` list) or a single attribute (required `attribute` enum)."""

    def __init__(self, world: World, rng: random.Random, key: str):
        super().__init__(world, rng)
        self.key = key
        self.table = RECORD_TABLES[key]
        self.style = "profile" if not self.table.attribute_names or rng.random() < 0.6 else "attribute"
        names = self.table.profile_names if self.style == "profile" else self.table.attribute_names
        self.name = rng.choice(names).format(p=self._prefix(self.table.service))

    def args(self, record: str, field: str) -> dict[str, Any]:
        t = self.table
        if field not in t.fields:
            raise KeyError(f"{t.key} has no field {field}")
        if self.style == "attribute":
            return {t.param: record, "attribute": field}
        if self.rng.random() < 0.5:
            return {t.param: record}
        return {t.param: record, "fields": [field]}

    def draft(self) -> ToolDraft:
        t = self.table
        rows = _rows(self.world, t.key)
        title = self._title(t.service)
        example = rows[0][t.label]
        summary = t.summary.format(title=title)
        field_doc = "; ".join(f"{f}: {d}" for f, d in t.fields.items())
        head = _FIND.substitute(
            records=_literal({str(r[t.label]).casefold(): r for r in rows}),
            fields=_literal(tuple(t.fields)),
            param=t.param,
            example=repr(example),
            label=t.label,
            entity=t.entity,
            title=title,
        )
        body = (_PROFILE if self.style == "profile" else _ATTRIBUTE).substitute(
            name=self.name, param=t.param, summary=summary, entity=t.entity, label=t.label
        )
        param_schema = {"type": "string", "description": f"Name of the {t.entity}, e.g. {example!r}."}
        if t.param == "ticker":
            param_schema["description"] = f"Ticker symbol, e.g. {example!r}."
        if self.style == "profile":
            props = {
                t.param: param_schema,
                "fields": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(t.fields)},
                    "description": f"Fields to return (default: all). {field_doc}.",
                },
            }
            params = {"type": "object", "properties": props, "required": [t.param]}
        else:
            props = {
                t.param: param_schema,
                "attribute": {
                    "type": "string",
                    "enum": list(t.fields),
                    "description": f"Which fact to return. {field_doc}.",
                },
            }
            params = {
                "type": "object",
                "properties": props,
                "required": [t.param, "attribute"],
                "additionalProperties": False,
            }
        return ToolDraft(self.name, summary, params, head + body)


# -- other data tools --------------------------------------------------------------------


class ClimateKind(ToolKind):
    key = "climate"

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.name = rng.choice(["{p}_monthly_climate", "{p}_get_climate_normals"]).format(p=self._prefix("weather"))

    def args(self, city: str, month: str) -> dict[str, Any]:
        return {"city": city, "month": month}

    def draft(self) -> ToolDraft:
        title = self._title("weather")
        data = {
            c.name.casefold(): {
                "city": c.name,
                "avg_temp_c": {m: _plain(t) for m, t in c.temps_c.items()},
                "avg_precip_mm": c.precip_mm,
            }
            for c in self.world.cities.values()
        }
        example = next(iter(self.world.cities))
        source = Template('''import difflib

_NORMALS = $data

_MONTHS = $months


def $name(city: str, month: str) -> dict:
    """Long-term climate normals of a city for one month: mean air temperature (°C) and mean
    precipitation (mm), from the $title."""
    if not isinstance(city, str) or not city.strip():
        raise ValueError("'city' must be a non-empty string, for example $example")
    key = " ".join(city.split()).casefold()
    if key not in _NORMALS:
        close = difflib.get_close_matches(key, list(_NORMALS), n=3, cutoff=0.6)
        hint = (" Did you mean: " + ", ".join(_NORMALS[k]["city"] for k in close) + "?") if close else ""
        raise ValueError(f"The $title has no station for {city!r}.{hint}")
    if not isinstance(month, str) or month.strip().lower() not in _MONTHS:
        raise ValueError(f"'month' must be an English month name such as 'july'; got {month!r}")
    m = month.strip().lower()
    row = _NORMALS[key]
    return {"city": row["city"], "month": m, "avg_temp_c": row["avg_temp_c"][m], "avg_precip_mm": row["avg_precip_mm"][m]}
''').substitute(data=_literal(data), months=_literal(tuple(MONTHS)), name=self.name, title=title, example=repr(example))
        description = (
            f"Monthly climate normals from the {title}: average temperature in °C and average precipitation "
            "in mm for a city and calendar month."
        )
        params = {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": f"City name, e.g. {example!r}."},
                "month": {"type": "string", "enum": list(MONTHS), "description": "Calendar month, lower case."},
            },
            "required": ["city", "month"],
        }
        return ToolDraft(self.name, description, params, source)


class FinancialsKind(ToolKind):
    key = "financials"
    METRICS = ("revenue", "operating_income", "net_income")

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.name = rng.choice(["{p}_company_financials", "{p}_get_annual_results"]).format(p=self._prefix("markets"))

    def args(self, company: str, year: int, metric: str) -> dict[str, Any]:
        return {"company": company, "fiscal_year": year, "metric": metric}

    def draft(self) -> ToolDraft:
        title = self._title("markets")
        data = {
            c.name.casefold(): {
                "company": c.name,
                "currency": c.currency,
                "results": {y: {k: _plain(v) for k, v in m.items()} for y, m in c.financials.items()},
            }
            for c in self.world.companies.values()
        }
        example = next(iter(self.world.companies))
        source = Template('''import difflib

_RESULTS = $data

_METRICS = $metrics


def $name(company: str, fiscal_year: int, metric: str = "revenue") -> dict:
    """Audited annual results of a listed company, in millions of its reporting currency,
    from $title."""
    if not isinstance(company, str) or not company.strip():
        raise ValueError("'company' must be a non-empty string, for example $example")
    key = " ".join(company.split()).casefold()
    if key not in _RESULTS:
        close = difflib.get_close_matches(key, list(_RESULTS), n=3, cutoff=0.6)
        hint = (" Did you mean: " + ", ".join(_RESULTS[k]["company"] for k in close) + "?") if close else ""
        raise ValueError(f"No annual results on file for {company!r}.{hint}")
    if isinstance(fiscal_year, bool) or not isinstance(fiscal_year, int):
        raise ValueError(f"'fiscal_year' must be an integer year; got {fiscal_year!r}")
    row = _RESULTS[key]
    if fiscal_year not in row["results"]:
        raise ValueError(f"No results for fiscal year {fiscal_year}; available: {sorted(row['results'])}")
    if metric not in _METRICS:
        raise ValueError(f"'metric' must be one of {', '.join(_METRICS)}; got {metric!r}")
    return {
        "company": row["company"],
        "fiscal_year": fiscal_year,
        "metric": metric,
        "value_millions": row["results"][fiscal_year][metric],
        "currency": row["currency"],
    }
''').substitute(data=_literal(data), metrics=_literal(self.METRICS), name=self.name, title=title, example=repr(example))
        description = (
            f"Annual financial results from {title}: revenue, operating income or net income of a company "
            "for a fiscal year, in millions of the company's reporting currency."
        )
        params = {
            "type": "object",
            "properties": {
                "company": {"type": "string", "description": f"Company name, e.g. {example!r}."},
                "fiscal_year": {"type": "integer", "enum": list(FISCAL_YEARS), "description": "Fiscal year."},
                "metric": {
                    "type": "string",
                    "enum": list(self.METRICS),
                    "description": "Which figure to return (default revenue).",
                },
            },
            "required": ["company", "fiscal_year"],
        }
        return ToolDraft(self.name, description, params, source)


class DistanceKind(ToolKind):
    key = "distance"

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.name = rng.choice(["{p}_road_distance", "{p}_get_driving_distance"]).format(p=self._prefix("atlas"))

    def args(self, a: str, b: str, unit: str) -> dict[str, Any]:
        return {"origin": a, "destination": b, "unit": unit}

    def draft(self) -> ToolDraft:
        title = self._title("atlas")
        names = {c.casefold(): c for c in self.world.cities}
        table = {"|".join(sorted(k.casefold() for k in pair)): km for pair, km in self.world.distances_km.items()}
        example = next(iter(self.world.cities))
        source = Template('''import difflib

_CITIES = $names

_ROAD_KM = $table

_KM_PER_MILE = 1.609344


def _city(value, role):
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"'{role}' must be a non-empty city name, for example $example")
    key = " ".join(value.split()).casefold()
    if key not in _CITIES:
        close = difflib.get_close_matches(key, list(_CITIES), n=3, cutoff=0.6)
        hint = (" Did you mean: " + ", ".join(_CITIES[k] for k in close) + "?") if close else ""
        raise ValueError(f"The $title has no road data for {value!r}.{hint}")
    return key


def $name(origin: str, destination: str, unit: str = "km") -> dict:
    """Shortest road distance between two cities in the $title, in kilometres or miles."""
    a, b = _city(origin, "origin"), _city(destination, "destination")
    if unit not in ("km", "mi"):
        raise ValueError(f"'unit' must be 'km' or 'mi'; got {unit!r}")
    if a == b:
        raise ValueError("origin and destination are the same city")
    km = _ROAD_KM["|".join(sorted((a, b)))]
    distance = km if unit == "km" else round(km / _KM_PER_MILE, 1)
    return {"origin": _CITIES[a], "destination": _CITIES[b], "distance": distance, "unit": unit}
''').substitute(names=_literal(names), table=_literal(table), name=self.name, title=title, example=repr(example))
        description = f"Road distance between two cities from the {title}, in km (default) or miles."
        params = {
            "type": "object",
            "properties": {
                "origin": {"type": "string", "description": "Start city."},
                "destination": {"type": "string", "description": "End city."},
                "unit": {"type": "string", "enum": ["km", "mi"], "description": "Distance unit (default km)."},
            },
            "required": ["origin", "destination"],
        }
        return ToolDraft(self.name, description, params, source)


class ListCitiesKind(ToolKind):
    key = "list_cities"

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.name = rng.choice(["{p}_list_cities", "{p}_search_cities"]).format(p=self._prefix("atlas"))

    def args(self, country: str) -> dict[str, Any]:
        return {"country": country, "sort_by": "population", "order": "desc", "limit": self.rng.choice([3, 5, 10])}

    def draft(self) -> ToolDraft:
        title = self._title("atlas")
        rows = [
            {"city": c.name, "country": c.country, "population": c.population, "founded_year": c.founded_year}
            for c in self.world.cities.values()
        ]
        countries = {c.casefold(): c for c in self.world.countries}
        source = Template('''_CITIES = $rows

_COUNTRIES = $countries

_SORT_KEYS = ("population", "founded_year", "city")


def $name(country: str, sort_by: str = "population", order: str = "desc", limit: int = 10) -> dict:
    """List the cities of a country in the $title, sorted by population, founding year or name."""
    if not isinstance(country, str) or " ".join(country.split()).casefold() not in _COUNTRIES:
        raise ValueError(f"Unknown country {country!r}; known countries: {', '.join(sorted(_COUNTRIES.values()))}")
    if sort_by not in _SORT_KEYS:
        raise ValueError(f"'sort_by' must be one of {', '.join(_SORT_KEYS)}; got {sort_by!r}")
    if order not in ("asc", "desc"):
        raise ValueError(f"'order' must be 'asc' or 'desc'; got {order!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 50:
        raise ValueError(f"'limit' must be an integer between 1 and 50; got {limit!r}")
    name = _COUNTRIES[" ".join(country.split()).casefold()]
    found = [c for c in _CITIES if c["country"] == name]
    found.sort(key=lambda c: c[sort_by], reverse=(order == "desc"))
    return {"country": name, "sort_by": sort_by, "order": order, "cities": found[:limit]}
''').substitute(rows=_literal(rows), countries=_literal(countries), name=self.name, title=title)
        description = (
            f"List the cities of a country from the {title}, sorted by population, founding year or name, "
            "with each city's population and founding year."
        )
        params = {
            "type": "object",
            "properties": {
                "country": {"type": "string", "description": "Country name."},
                "sort_by": {"type": "string", "enum": ["population", "founded_year", "city"], "description": "Sort key (default population)."},
                "order": {"type": "string", "enum": ["asc", "desc"], "description": "Sort order (default desc)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Maximum number of cities (default 10)."},
            },
            "required": ["country"],
        }  # fmt: skip
        return ToolDraft(self.name, description, params, source)


class FxKind(ToolKind):
    key = "fx"

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.name = rng.choice(["{p}_convert_currency", "{p}_fx_convert"]).format(p=self._prefix("markets"))

    def args(self, amount: Decimal, src: str, dst: str) -> dict[str, Any]:
        return {"amount": _plain(amount), "from_currency": src, "to_currency": dst}

    def draft(self) -> ToolDraft:
        title = self._title("markets")
        rates = {code: _plain(r) for code, r in self.world.usd_per_unit.items()}
        source = Template('''_USD_PER_UNIT = $rates


def $name(amount: float, from_currency: str, to_currency: str) -> dict:
    """Convert an amount between currencies at the $title reference rates (mid-market)."""
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        raise ValueError(f"'amount' must be a number; got {amount!r}")
    if amount < 0:
        raise ValueError("'amount' must not be negative")
    codes = []
    for role, code in (("from_currency", from_currency), ("to_currency", to_currency)):
        if not isinstance(code, str) or code.strip().upper() not in _USD_PER_UNIT:
            raise ValueError(f"'{role}' must be one of {', '.join(sorted(_USD_PER_UNIT))}; got {code!r}")
        codes.append(code.strip().upper())
    src, dst = codes
    rate = _USD_PER_UNIT[src] / _USD_PER_UNIT[dst]
    return {
        "amount": amount,
        "from_currency": src,
        "to_currency": dst,
        "rate": round(rate, 6),
        "converted_amount": round(amount * _USD_PER_UNIT[src] / _USD_PER_UNIT[dst], 2),
    }
''').substitute(rates=_literal(rates), name=self.name, title=title)
        codes = sorted(rates)
        description = (
            f"Convert money between currencies at {title} reference rates; supports {', '.join(codes)}. "
            "The result is rounded to 2 decimals."
        )
        params = {
            "type": "object",
            "properties": {
                "amount": {"type": "number", "minimum": 0, "description": "Amount in the source currency."},
                "from_currency": {"type": "string", "enum": codes, "description": "Source currency code."},
                "to_currency": {"type": "string", "enum": codes, "description": "Target currency code."},
            },
            "required": ["amount", "from_currency", "to_currency"],
        }
        return ToolDraft(self.name, description, params, source)


# -- pure tools: identical in every environment ------------------------------------------


class PureKind(ToolKind):
    """A tool without world data. Subclasses give the fixed name, documentation and source."""

    description = ""
    parameters: dict[str, Any] = {}
    source = ""

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.name = type(self).key

    def draft(self) -> ToolDraft:
        return ToolDraft(self.name, self.description, self.parameters, self.source)


LENGTH_UNITS = {"m": "1", "km": "1000", "ft": "0.3048", "mi": "1609.344"}
MASS_UNITS = {"kg": "1", "g": "0.001", "lb": "0.45359237"}


class ConvertUnits(PureKind):
    key = "convert_units"
    description = (
        "Convert a measurement between units of length (m, km, ft, mi), mass (kg, g, lb) or "
        "temperature (celsius, fahrenheit). The result is rounded to 2 decimals."
    )
    parameters = {
        "type": "object",
        "properties": {
            "value": {"type": "number", "description": "The quantity to convert."},
            "from_unit": {"type": "string", "enum": [*LENGTH_UNITS, *MASS_UNITS, "celsius", "fahrenheit"]},
            "to_unit": {"type": "string", "enum": [*LENGTH_UNITS, *MASS_UNITS, "celsius", "fahrenheit"]},
        },
        "required": ["value", "from_unit", "to_unit"],
    }
    source = Template('''_LENGTH_M = $length
_MASS_KG = $mass
_TEMPERATURE = ("celsius", "fahrenheit")


def convert_units(value: float, from_unit: str, to_unit: str) -> dict:
    """Convert a length, mass or temperature between units; rounded to 2 decimals."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"'value' must be a number; got {value!r}")
    for table in (_LENGTH_M, _MASS_KG):
        if from_unit in table and to_unit in table:
            result = value * table[from_unit] / table[to_unit]
            break
    else:
        if from_unit in _TEMPERATURE and to_unit in _TEMPERATURE:
            if from_unit == to_unit:
                result = value
            elif from_unit == "celsius":
                result = value * 9 / 5 + 32
            else:
                result = (value - 32) * 5 / 9
        else:
            known = ", ".join([*_LENGTH_M, *_MASS_KG, *_TEMPERATURE])
            raise ValueError(f"cannot convert {from_unit!r} to {to_unit!r}: units must be of one kind ({known})")
    return {"value": value, "from_unit": from_unit, "to_unit": to_unit, "result": round(result, 2)}
''').substitute(
        length=_literal({k: float(v) for k, v in LENGTH_UNITS.items()}),
        mass=_literal({k: float(v) for k, v in MASS_UNITS.items()}),
    )

    def args(self, value: Any, src: str, dst: str) -> dict[str, Any]:
        return {"value": _plain(value), "from_unit": src, "to_unit": dst}


class PercentChange(PureKind):
    key = "calculate_percentage_change"
    description = "Percentage change from an old value to a new value: (new - old) / old * 100, rounded to 2 decimals."
    parameters = {
        "type": "object",
        "properties": {
            "old_value": {"type": "number", "description": "The reference (earlier or smaller) value; not zero."},
            "new_value": {"type": "number", "description": "The value compared with it."},
        },
        "required": ["old_value", "new_value"],
    }
    source = '''def calculate_percentage_change(old_value: float, new_value: float) -> dict:
    """Percentage change from old_value to new_value, rounded to 2 decimals."""
    for role, v in (("old_value", old_value), ("new_value", new_value)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"'{role}' must be a number; got {v!r}")
    if old_value == 0:
        raise ValueError("'old_value' must not be zero")
    change = (new_value - old_value) / old_value * 100
    return {"old_value": old_value, "new_value": new_value, "percent_change": round(change, 2)}
'''

    def args(self, old: Any, new: Any) -> dict[str, Any]:
        return {"old_value": _plain(old), "new_value": _plain(new)}


class Density(PureKind):
    key = "calculate_population_density"
    description = "Population density in inhabitants per square kilometre, rounded to 2 decimals."
    parameters = {
        "type": "object",
        "properties": {
            "population": {"type": "integer", "minimum": 0, "description": "Number of inhabitants."},
            "area_km2": {"type": "number", "exclusiveMinimum": 0, "description": "Area in km²."},
        },
        "required": ["population", "area_km2"],
    }
    source = '''def calculate_population_density(population: int, area_km2: float) -> dict:
    """Inhabitants per km², rounded to 2 decimals."""
    if isinstance(population, bool) or not isinstance(population, int) or population < 0:
        raise ValueError(f"'population' must be a non-negative integer; got {population!r}")
    if isinstance(area_km2, bool) or not isinstance(area_km2, (int, float)) or area_km2 <= 0:
        raise ValueError(f"'area_km2' must be a positive number; got {area_km2!r}")
    return {"population": population, "area_km2": area_km2, "density_per_km2": round(population / area_km2, 2)}
'''

    def args(self, population: int, area: int) -> dict[str, Any]:
        return {"population": population, "area_km2": area}


_DATE_CHECK = """import datetime


def _date(value, role):
    if not isinstance(value, str):
        raise ValueError(f"'{role}' must be a date string YYYY-MM-DD; got {value!r}")
    try:
        return datetime.date.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"'{role}' must be a date string YYYY-MM-DD; got {value!r}") from None
"""


class DaysBetween(PureKind):
    key = "days_between_dates"
    description = (
        "Number of days from a start date to an end date (ISO YYYY-MM-DD). With inclusive=true both "
        "the start and the end day are counted."
    )
    parameters = {
        "type": "object",
        "properties": {
            "start_date": {"type": "string", "format": "date", "description": "Start date, YYYY-MM-DD."},
            "end_date": {"type": "string", "format": "date", "description": "End date, YYYY-MM-DD."},
            "inclusive": {"type": "boolean", "description": "Count both end points (default false)."},
        },
        "required": ["start_date", "end_date"],
    }
    source = (
        _DATE_CHECK
        + '''

def days_between_dates(start_date: str, end_date: str, inclusive: bool = False) -> dict:
    """Days from start_date to end_date (negative when end_date is earlier)."""
    start, end = _date(start_date, "start_date"), _date(end_date, "end_date")
    if not isinstance(inclusive, bool):
        raise ValueError(f"'inclusive' must be true or false; got {inclusive!r}")
    days = (end - start).days
    if inclusive:
        days += 1 if days >= 0 else -1
    return {"start_date": start.isoformat(), "end_date": end.isoformat(), "inclusive": inclusive, "days": days}
'''
    )

    def args(self, start: dt.date, end: dt.date, inclusive: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"start_date": start.isoformat(), "end_date": end.isoformat()}
        if inclusive:
            out["inclusive"] = True
        return out


class DayOfWeek(PureKind):
    key = "get_day_of_week"
    description = "The day of the week (Monday..Sunday) of a calendar date given as YYYY-MM-DD."
    parameters = {
        "type": "object",
        "properties": {"date": {"type": "string", "format": "date", "description": "Date, YYYY-MM-DD."}},
        "required": ["date"],
    }
    source = (
        _DATE_CHECK
        + '''
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def get_day_of_week(date: str) -> dict:
    """Weekday name of an ISO date."""
    d = _date(date, "date")
    return {"date": d.isoformat(), "day_of_week": _DAYS[d.weekday()]}
'''
    )

    def args(self, date: dt.date) -> dict[str, Any]:
        return {"date": date.isoformat()}


class Age(PureKind):
    key = "calculate_age"
    description = "Age in completed years of a person born on birth_date, as of on_date (both YYYY-MM-DD)."
    parameters = {
        "type": "object",
        "properties": {
            "birth_date": {"type": "string", "format": "date", "description": "Date of birth, YYYY-MM-DD."},
            "on_date": {"type": "string", "format": "date", "description": "Reference date, YYYY-MM-DD."},
        },
        "required": ["birth_date", "on_date"],
    }
    source = (
        _DATE_CHECK
        + '''

def calculate_age(birth_date: str, on_date: str) -> dict:
    """Completed years between birth_date and on_date."""
    born, on = _date(birth_date, "birth_date"), _date(on_date, "on_date")
    if on < born:
        raise ValueError("'on_date' is before 'birth_date'")
    years = on.year - born.year - ((on.month, on.day) < (born.month, born.day))
    return {"birth_date": born.isoformat(), "on_date": on.isoformat(), "age_years": years}
'''
    )

    def args(self, born: dt.date, on: dt.date) -> dict[str, Any]:
        return {"birth_date": born.isoformat(), "on_date": on.isoformat()}


class Statistics(PureKind):
    key = "compute_statistics"
    STATS = ("sum", "mean", "median", "min", "max", "range")
    description = (
        "Summary statistic of a list of numbers: sum, mean, median, min, max or range (max - min). "
        "Mean and median are rounded to 2 decimals."
    )
    parameters = {
        "type": "object",
        "properties": {
            "values": {"type": "array", "items": {"type": "number"}, "minItems": 1, "description": "The numbers."},
            "statistic": {"type": "string", "enum": list(STATS), "description": "Which statistic to compute."},
        },
        "required": ["values", "statistic"],
    }
    source = '''def compute_statistics(values: list, statistic: str) -> dict:
    """sum / mean / median / min / max / range of a non-empty list of numbers."""
    if not isinstance(values, list) or not values:
        raise ValueError("'values' must be a non-empty list of numbers")
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        raise ValueError(f"every entry of 'values' must be a number; got {values!r}")
    ordered = sorted(values)
    n = len(ordered)
    if statistic == "sum":
        result = sum(values)
    elif statistic == "mean":
        result = round(sum(values) / n, 2)
    elif statistic == "median":
        mid = n // 2
        result = round(ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2, 2)
    elif statistic == "min":
        result = ordered[0]
    elif statistic == "max":
        result = ordered[-1]
    elif statistic == "range":
        result = ordered[-1] - ordered[0]
    else:
        raise ValueError("'statistic' must be one of sum, mean, median, min, max, range; got " + repr(statistic))
    return {"statistic": statistic, "count": n, "result": result}
'''

    def args(self, values: list[Any], statistic: str) -> dict[str, Any]:
        return {"values": [_plain(v) for v in values], "statistic": statistic}


PURE_KINDS: dict[str, type[PureKind]] = {
    k.key: k for k in (ConvertUnits, PercentChange, Density, DaysBetween, DayOfWeek, Age, Statistics)
}
DATA_KINDS: dict[str, type[ToolKind]] = {
    k.key: k for k in (ClimateKind, FinancialsKind, DistanceKind, ListCitiesKind, FxKind)
}


def make_kind(key: str, world: World, rng: random.Random) -> ToolKind:
    if key in RECORD_TABLES:
        return RecordKind(world, rng, key)
    if key in DATA_KINDS:
        return DATA_KINDS[key](world, rng)
    return PURE_KINDS[key](world, rng)
