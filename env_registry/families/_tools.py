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
"did you mean" hints. Each is a real module in `tool_templates`, rendered with the world's data.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from env_registry.families._vocabulary import RECORD_TABLES, RecordTable
from env_registry.families._world import FISCAL_YEARS, MONTHS, TICKER, World
from env_registry.families.tool_templates import render
from env_registry.families.tool_templates.convert_units import LENGTH_M, MASS_KG, TEMPERATURE
from env_registry.families.tool_templates.statistics import STATISTICS
from env_registry.spec import CallKey


@dataclass(frozen=True)
class ToolDraft:
    name: str
    description: str
    parameters: dict[str, Any]
    source: str


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

    def call_key(self) -> CallKey:
        """The arguments that identify what a call of this tool asks (see `CallKey`)."""
        raise NotImplementedError

    def _title(self, service: str) -> str:
        return _SERVICE_TITLE[service].format(brand=self.world.brands[service])

    def _prefix(self, service: str) -> str:
        return self.world.brands[service].lower()


# -- record lookups (city, country, company, person, product, event, stock quote) ----------


def _rows(world: World, table: RecordTable) -> list[dict[str, Any]]:
    """The table's records as the tool serves them: the name, then every field in order."""
    return [
        {table.label: name, **{f.name: _plain(f.read(record)) for f in table.fields}}
        for name, record in table.etype.records(world).items()
    ]


def _profile_args(kind: RecordKind, record: str, field: str) -> dict[str, Any]:
    # Half the golden calls ask for all fields: both are what a model would write.
    if kind.rng.random() < 0.5:
        return {kind.table.param: record}
    return {kind.table.param: record, "fields": [field]}


def _profile_schema(t: RecordTable, key: dict[str, Any], field_doc: str) -> dict[str, Any]:
    fields = {
        "type": "array",
        "items": {"type": "string", "enum": [f.name for f in t.fields]},
        "description": f"Fields to return (default: all). {field_doc}.",
    }
    return {"type": "object", "properties": {t.param: key, "fields": fields}, "required": [t.param]}


def _batch_args(kind: RecordKind, record: str, field: str) -> dict[str, Any]:
    if kind.rng.random() < 0.5:
        return {kind.table.plural: [record]}
    return {kind.table.plural: [record], "fields": [field]}


def _batch_schema(t: RecordTable, key: dict[str, Any], field_doc: str) -> dict[str, Any]:
    names = {"type": "array", "items": key, "minItems": 1, "maxItems": 10, "description": f"Up to 10 {t.plural}."}
    schema = _profile_schema(t, key, field_doc)
    return {**schema, "properties": {t.plural: names, "fields": schema["properties"]["fields"]}, "required": [t.plural]}


def _attribute_schema(t: RecordTable, key: dict[str, Any], field_doc: str) -> dict[str, Any]:
    attribute = {
        "type": "string",
        "enum": [f.name for f in t.fields],
        "description": f"Which fact to return. {field_doc}.",
    }
    return {
        "type": "object",
        "properties": {t.param: key, "attribute": attribute},
        "required": [t.param, "attribute"],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class _Style:
    """One API style of a record lookup."""

    template: str
    placeholder: str  # the template's name for the argument naming the records
    param: Callable[[RecordTable], str]  # the argument's name in the tool
    names: Callable[[RecordTable], tuple[str, ...]]
    args: Callable[[RecordKind, str, str], dict[str, Any]]  # (kind, record name, field)
    schema: Callable[[RecordTable, dict[str, Any], str], dict[str, Any]]  # (table, key schema, field docs)
    returns: Callable[[RecordTable], str]  # the docstring's last paragraph
    weight: int  # how often tables are served in this style
    key: Callable[[RecordTable], CallKey]


PROFILE = _Style(
    "record_profile",
    "entity",
    lambda t: t.param,
    lambda t: t.profile_names,
    _profile_args,
    _profile_schema,
    lambda t: (
        f"Returns a dict with the {t.entity}'s name and the requested fields (all fields when\n`fields` is omitted)."
    ),
    5,
    lambda t: CallKey(params=[t.param]),  # `fields` only selects what comes back
)
ATTRIBUTE = _Style(
    "record_attribute",
    "entity",
    lambda t: t.param,
    lambda t: t.attribute_names,
    lambda kind, record, field: {kind.table.param: record, "attribute": field},
    _attribute_schema,
    lambda t: f'Returns {{"{t.label}": ..., "attribute": ..., "value": ...}}.',
    3,
    lambda t: CallKey(params=[t.param, "attribute"]),
)
BATCH = _Style(
    "record_batch",
    "entities",
    lambda t: t.plural,
    lambda t: ("{p}_get_" + t.plural, "{p}_batch_" + t.plural),
    _batch_args,
    _batch_schema,
    lambda t: (
        f'Returns {{"results": [...]}}: per {t.entity} its name and the requested fields (all fields\n'
        "when `fields` is omitted), in the order asked."
    ),
    2,
    lambda t: CallKey(params=[t.plural], includes=[t.plural]),  # a batch may hold more records
)


class RecordKind(ToolKind):
    """A lookup over one table of the world, in one of three API styles: a profile (optional
    `fields` list), a single attribute (required `attribute` enum) or a batch of profiles."""

    def __init__(self, world: World, rng: random.Random, key: str):
        super().__init__(world, rng)
        self.key = key
        self.table = RECORD_TABLES[key]
        styles = [s for s in (PROFILE, ATTRIBUTE, BATCH) if s.names(self.table)]
        self.style = rng.choices(styles, weights=[s.weight for s in styles])[0]
        self.name = rng.choice(self.style.names(self.table)).format(p=self._prefix(self.table.service))

    def args(self, record: str, field: str) -> dict[str, Any]:
        if all(f.name != field for f in self.table.fields):
            raise KeyError(f"{self.table.key} has no field {field}")
        return self.style.args(self, record, field)

    def call_key(self) -> CallKey:
        return self.style.key(self.table)

    def draft(self) -> ToolDraft:
        t = self.table
        rows = _rows(self.world, t)
        title = self._title(t.service)
        example = rows[0][t.label]
        summary = t.summary.format(title=title)
        data = {
            "_TITLE": title,
            "_WHAT": t.entity,
            "_LABEL": t.label,
            "_RECORDS": {str(r[t.label]).casefold(): r for r in rows},
            "_FIELDS": tuple(f.name for f in t.fields),
        }
        doc = f"{summary}\n\n{self.style.returns(t)}\n"
        param = self.style.param(t)
        data["_PARAM"] = param
        source = render(self.style.template, self.name, params={self.style.placeholder: param}, data=data, doc=doc)
        what = "Ticker symbol" if t.etype is TICKER else f"Name of the {t.entity}"
        key = {"type": "string", "description": f"{what}, e.g. {example!r}."}
        field_doc = "; ".join(f"{f.name}: {f.doc}" for f in t.fields)
        return ToolDraft(self.name, summary, self.style.schema(t, key, field_doc), source)


# -- other data tools --------------------------------------------------------------------


class ClimateKind(ToolKind):
    """Climate normals, in one of two API styles: one month of a city, or its whole year."""

    key = "climate"

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.by_month = rng.random() < 0.6
        names = ["{p}_monthly_climate", "{p}_get_climate_normals"] if self.by_month else ["{p}_climate_year"]
        self.name = rng.choice(names).format(p=self._prefix("weather"))

    def args(self, city: str, month: str) -> dict[str, Any]:
        return {"city": city, "month": month} if self.by_month else {"city": city}

    def call_key(self) -> CallKey:
        return CallKey(params=["city", "month"] if self.by_month else ["city"])

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
        city = {"type": "string", "description": f"City name, e.g. {example!r}."}
        if not self.by_month:
            description = (
                f"Climate normals of a city from the {title}: average temperature in °C and average "
                "precipitation in mm for each calendar month."
            )
            source = render("climate_year", self.name, data={"_TITLE": title, "_NORMALS": data}, doc=description)
            params = {"type": "object", "properties": {"city": city}, "required": ["city"]}
            return ToolDraft(self.name, description, params, source)
        doc = (
            "Long-term climate normals of a city for one month: mean air temperature (°C) and mean\n"
            f"precipitation (mm), from the {title}."
        )
        source = render(
            "climate", self.name, data={"_TITLE": title, "_NORMALS": data, "_MONTHS": tuple(MONTHS)}, doc=doc
        )
        description = (
            f"Monthly climate normals from the {title}: average temperature in °C and average precipitation "
            "in mm for a city and calendar month."
        )
        month = {"type": "string", "enum": list(MONTHS), "description": "Calendar month, lower case."}
        params = {"type": "object", "properties": {"city": city, "month": month}, "required": ["city", "month"]}
        return ToolDraft(self.name, description, params, source)


class FinancialsKind(ToolKind):
    """Annual results, in one of two API styles: one metric, or the whole income statement."""

    key = "financials"
    METRICS = ("revenue", "operating_income", "net_income")

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.by_metric = rng.random() < 0.6
        names = ["{p}_company_financials", "{p}_get_annual_results"] if self.by_metric else ["{p}_income_statement"]
        self.name = rng.choice(names).format(p=self._prefix("markets"))

    def args(self, company: str, year: int, metric: str) -> dict[str, Any]:
        if self.by_metric:
            return {"company": company, "fiscal_year": year, "metric": metric}
        return {"company": company, "fiscal_year": year}

    def call_key(self) -> CallKey:
        if self.by_metric:
            return CallKey(params=["company", "fiscal_year", "metric"], defaults={"metric": "revenue"})
        return CallKey(params=["company", "fiscal_year"])

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
        props: dict[str, Any] = {
            "company": {"type": "string", "description": f"Company name, e.g. {example!r}."},
            "fiscal_year": {"type": "integer", "enum": list(FISCAL_YEARS), "description": "Fiscal year."},
        }
        if not self.by_metric:
            description = (
                f"Income statement of a company for one fiscal year from {title}: revenue, operating income and "
                "net income, in millions of the company's reporting currency."
            )
            source = render("financials_statement", self.name, data={"_TITLE": title, "_RESULTS": data})
            return ToolDraft(
                self.name, description, {"type": "object", "properties": props, "required": list(props)}, source
            )
        doc = f"Audited annual results of a listed company, in millions of its reporting currency,\nfrom {title}."
        source = render(
            "financials", self.name, data={"_TITLE": title, "_RESULTS": data, "_METRICS": self.METRICS}, doc=doc
        )
        description = (
            f"Annual financial results from {title}: revenue, operating income or net income of a company "
            "for a fiscal year, in millions of the company's reporting currency."
        )
        props["metric"] = {
            "type": "string",
            "enum": list(self.METRICS),
            "description": "Which figure to return (default revenue).",
        }
        params = {"type": "object", "properties": props, "required": ["company", "fiscal_year"]}
        return ToolDraft(self.name, description, params, source)


class DistanceKind(ToolKind):
    key = "distance"

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.name = rng.choice(["{p}_road_distance", "{p}_get_driving_distance"]).format(p=self._prefix("atlas"))

    def args(self, a: str, b: str, unit: str) -> dict[str, Any]:
        return {"origin": a, "destination": b, "unit": unit}

    def call_key(self) -> CallKey:
        # A road distance is symmetric: either city may come first.
        return CallKey(
            params=["origin", "destination", "unit"], unordered=[["origin", "destination"]], defaults={"unit": "km"}
        )

    def draft(self) -> ToolDraft:
        title = self._title("atlas")
        names = {c.casefold(): c for c in self.world.cities}
        table = {"|".join(sorted(k.casefold() for k in pair)): km for pair, km in self.world.distances_km.items()}
        doc = f"Shortest road distance between two cities in the {title}, in kilometres or miles."
        source = render("distance", self.name, data={"_TITLE": title, "_CITIES": names, "_ROAD_KM": table}, doc=doc)
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

    def call_key(self) -> CallKey:
        # The sort decides which city comes first; `limit` only cuts the list.
        return CallKey(params=["country", "sort_by", "order"], defaults={"sort_by": "population", "order": "desc"})

    def draft(self) -> ToolDraft:
        title = self._title("atlas")
        rows = [
            {"city": c.name, "country": c.country, "population": c.population, "founded_year": c.founded_year}
            for c in self.world.cities.values()
        ]
        countries = {c.casefold(): c for c in self.world.countries}
        doc = f"List the cities of a country in the {title}, sorted by population, founding year or name."
        data = {"_TITLE": title, "_CITIES": rows, "_COUNTRIES": countries}
        source = render("list_cities", self.name, data=data, doc=doc)
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

    def call_key(self) -> CallKey:
        return CallKey(params=["amount", "from_currency", "to_currency"])

    def draft(self) -> ToolDraft:
        title = self._title("markets")
        rates = {code: _plain(r) for code, r in self.world.usd_per_unit.items()}
        doc = f"Convert an amount between currencies at the {title} reference rates (mid-market)."
        source = render("fx", self.name, data={"_USD_PER_UNIT": rates}, doc=doc)
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


class EventsInCityKind(ToolKind):
    """The events a city hosts, by start date."""

    key = "events_in_city"

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.name = rng.choice(["{p}_events_in_city", "{p}_city_calendar"]).format(p=self._prefix("events"))

    def args(self, city: str) -> dict[str, Any]:
        return {"city": city} if self.rng.random() < 0.5 else {"city": city, "limit": self.rng.choice([3, 5])}

    def call_key(self) -> CallKey:
        return CallKey(params=["city", "order"], defaults={"order": "asc"})

    def draft(self) -> ToolDraft:
        title = self._title("events")
        events = [
            {
                "event": e.name,
                "city": e.city,
                "start_date": e.start_date.isoformat(),
                "end_date": e.end_date.isoformat(),
            }
            for e in self.world.events.values()
        ]
        data = {"_TITLE": title, "_CITIES": {c.casefold(): c for c in self.world.cities}, "_EVENTS": events}
        description = (
            f"Public events a city hosts, from the {title}, ordered by start date (earliest first by default), "
            "with their first and last day."
        )
        source = render("events_in_city", self.name, data=data, doc=description)
        params = {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "Host city."},
                "order": {"type": "string", "enum": ["asc", "desc"], "description": "By start date (default asc)."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Maximum number of events (default 10)."},
            },
            "required": ["city"],
        }  # fmt: skip
        return ToolDraft(self.name, description, params, source)


class CatalogSearchKind(ToolKind):
    """The products one company makes."""

    key = "catalog_search"

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.name = rng.choice(["{p}_catalog_search", "{p}_products_by_maker"]).format(p=self._prefix("catalog"))

    def args(self, maker: str) -> dict[str, Any]:
        return {"maker": maker}

    def call_key(self) -> CallKey:
        return CallKey(params=["maker"])

    def draft(self) -> ToolDraft:
        title = self._title("catalog")
        products = [
            {
                "product": p.name,
                "maker": p.maker,
                "category": p.category,
                "price": _plain(p.price),
                "currency": p.currency,
            }
            for p in self.world.products.values()
        ]
        data = {"_TITLE": title, "_MAKERS": {c.casefold(): c for c in self.world.companies}, "_PRODUCTS": products}
        description = (
            f"Search the {title} by manufacturer: every product a company makes, with category and list price."
        )
        source = render("catalog_search", self.name, data=data, doc=description)
        maker = {"type": "string", "description": "Manufacturer (company name)."}
        return ToolDraft(
            self.name, description, {"type": "object", "properties": {"maker": maker}, "required": ["maker"]}, source
        )


class RateKind(ToolKind):
    """The reference exchange rate between two currencies."""

    key = "exchange_rate"

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.name = rng.choice(["{p}_exchange_rate", "{p}_get_fx_rate"]).format(p=self._prefix("markets"))

    def args(self, base: str, quote: str) -> dict[str, Any]:
        return {"base": base, "quote": quote}

    def call_key(self) -> CallKey:
        return CallKey(params=["base", "quote"])

    def draft(self) -> ToolDraft:
        title = self._title("markets")
        rates = {code: _plain(r) for code, r in self.world.usd_per_unit.items()}
        codes = sorted(rates)
        description = (
            f"Reference exchange rate from {title}: how many units of the quote currency one unit of the base "
            f"currency buys (6 decimals). Currencies: {', '.join(codes)}."
        )
        source = render("exchange_rate", self.name, data={"_USD_PER_UNIT": rates}, doc=description)
        params = {
            "type": "object",
            "properties": {
                "base": {"type": "string", "enum": codes, "description": "Currency code being priced."},
                "quote": {"type": "string", "enum": codes, "description": "Currency code the price is given in."},
            },
            "required": ["base", "quote"],
        }
        return ToolDraft(self.name, description, params, source)


# -- pure tools: identical in every environment ------------------------------------------


class PureKind(ToolKind):
    """A tool without world data. Subclasses give the fixed name, documentation and source."""

    description = ""
    parameters: dict[str, Any] = {}
    template = ""  # module in tool_templates
    identifying = CallKey(params=[])  # every input of a pure tool says what it computes

    def __init__(self, world: World, rng: random.Random):
        super().__init__(world, rng)
        self.name = type(self).key

    def draft(self) -> ToolDraft:
        return ToolDraft(self.name, self.description, self.parameters, render(self.template, self.name))

    def call_key(self) -> CallKey:
        return self.identifying


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
            "from_unit": {"type": "string", "enum": [*LENGTH_M, *MASS_KG, *TEMPERATURE]},
            "to_unit": {"type": "string", "enum": [*LENGTH_M, *MASS_KG, *TEMPERATURE]},
        },
        "required": ["value", "from_unit", "to_unit"],
    }
    template = "convert_units"
    identifying = CallKey(params=["value", "from_unit", "to_unit"])

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
    template = "percentage_change"
    identifying = CallKey(params=["old_value", "new_value"])

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
    template = "population_density"
    identifying = CallKey(params=["population", "area_km2"])

    def args(self, population: int, area: int) -> dict[str, Any]:
        return {"population": population, "area_km2": area}


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
    template = "days_between"
    identifying = CallKey(params=["start_date", "end_date", "inclusive"], defaults={"inclusive": False})

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
    template = "day_of_week"
    identifying = CallKey(params=["date"])

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
    template = "age"
    identifying = CallKey(params=["birth_date", "on_date"])

    def args(self, born: dt.date, on: dt.date) -> dict[str, Any]:
        return {"birth_date": born.isoformat(), "on_date": on.isoformat()}


class Statistics(PureKind):
    key = "compute_statistics"
    description = (
        "Summary statistic of a list of numbers: sum, mean, median, min, max or range (max - min). "
        "Mean and median are rounded to 2 decimals."
    )
    parameters = {
        "type": "object",
        "properties": {
            "values": {"type": "array", "items": {"type": "number"}, "minItems": 1, "description": "The numbers."},
            "statistic": {"type": "string", "enum": list(STATISTICS), "description": "Which statistic to compute."},
        },
        "required": ["values", "statistic"],
    }
    template = "statistics"
    identifying = CallKey(params=["values", "statistic"])

    def args(self, values: list[Any], statistic: str) -> dict[str, Any]:
        return {"values": [_plain(v) for v in values], "statistic": statistic}


class AddDays(PureKind):
    key = "add_days"
    description = "The calendar date a number of days after (or, when negative, before) a date given as YYYY-MM-DD."
    parameters = {
        "type": "object",
        "properties": {
            "date": {"type": "string", "format": "date", "description": "Start date, YYYY-MM-DD."},
            "days": {"type": "integer", "description": "Days to add (negative: subtract)."},
        },
        "required": ["date", "days"],
    }
    template = "add_days"
    identifying = CallKey(params=["date", "days"])

    def args(self, date: dt.date, days: int) -> dict[str, Any]:
        return {"date": date.isoformat(), "days": days}


class Percentage(PureKind):
    key = "calculate_percentage"
    description = "One number as a percentage of another: part / whole * 100, rounded to 2 decimals."
    parameters = {
        "type": "object",
        "properties": {
            "part": {"type": "number", "description": "The share."},
            "whole": {"type": "number", "description": "The total it is a share of; not zero."},
        },
        "required": ["part", "whole"],
    }
    template = "percentage"
    identifying = CallKey(params=["part", "whole"])

    def args(self, part: Any, whole: Any) -> dict[str, Any]:
        return {"part": _plain(part), "whole": _plain(whole)}


PURE_KINDS: dict[str, type[PureKind]] = {
    k.key: k
    for k in (ConvertUnits, PercentChange, Density, DaysBetween, DayOfWeek, Age, Statistics, AddDays, Percentage)
}
DATA_KINDS: dict[str, type[ToolKind]] = {
    k.key: k
    for k in (
        ClimateKind,
        FinancialsKind,
        DistanceKind,
        ListCitiesKind,
        FxKind,
        EventsInCityKind,
        CatalogSearchKind,
        RateKind,
    )
}


def make_kind(key: str, world: World, rng: random.Random) -> ToolKind:
    if key in RECORD_TABLES:
        return RecordKind(world, rng, key)
    if key in DATA_KINDS:
        return DATA_KINDS[key](world, rng)
    return PURE_KINDS[key](world, rng)
