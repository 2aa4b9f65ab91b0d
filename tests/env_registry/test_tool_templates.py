"""The procedural tools as Python modules: each runs as it stands, and renders into a
self-contained source that behaves like the module with the environment's data."""

from __future__ import annotations

import ast
import importlib
import pkgutil

import pytest

from env_registry.families import tool_templates
from env_registry.families.tool_templates import TemplateError, render, slots

TEMPLATES = sorted(m.name for m in pkgutil.iter_modules(tool_templates.__path__) if not m.name.startswith("_"))


def module(name: str):
    return importlib.import_module(f"{tool_templates.__name__}.{name}")


def run(source: str, function: str, *args, **kwargs):
    namespace: dict = {}
    exec(compile(source, "<tool>", "exec"), namespace)  # our own template, not model-written code
    return namespace[function](*args, **kwargs)


def test_every_template_renders_to_a_self_contained_standard_library_module():
    assert len(TEMPLATES) >= 20
    for name in TEMPLATES:
        source = render(name, f"tool_{name}", data=slots(name))
        tree = ast.parse(source)
        imports = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not any(isinstance(n, ast.ImportFrom) for n in ast.walk(tree)), name
        assert imports <= {"difflib", "datetime"}, (name, imports)
        assert [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")] == [
            f"tool_{name}"
        ]


def test_a_template_runs_directly_with_its_example_data():
    profile = module("record_profile")
    assert profile.profile("  SPRINGFIELD ") == {"city": "Springfield", "population": 30720}
    with pytest.raises(ValueError, match="Did you mean: Springfield"):
        profile.profile("Springfeld")
    with pytest.raises(ValueError, match="Unknown field"):
        profile.profile("Springfield", ["area"])
    assert module("statistics").compute_statistics([3, 1, 2], "median")["result"] == 2
    assert module("distance").road_distance("Springfield", "shelbyville", "mi")["distance"] == 26.1
    assert module("list_cities").list_cities("freedonia", limit=1)["cities"][0]["city"] == "Springfield"
    assert module("day_of_week").get_day_of_week("2025-01-01")["day_of_week"] == "Wednesday"
    assert module("add_days").add_days("2024-12-25", 10)["result"] == "2025-01-04"
    assert module("percentage").calculate_percentage(1, 8)["percentage"] == 12.5
    assert module("exchange_rate").exchange_rate("eur", "USD")["rate"] == 1.08
    assert module("record_batch").lookup_many(["springfield"], ["population"]) == {
        "results": [{"city": "Springfield", "population": 30720}]
    }
    assert module("events_in_city").events_in_city("Springfield")["events"][0]["event"] == "Springfield Jazz Week"
    assert module("catalog_search").catalog_search("ACME labs")["products"][0]["product"] == "Acme Drill X2"
    assert module("climate_year").climate_year("springfield")["avg_temp_c"] == {"july": 21.5}
    assert module("financials_statement").income_statement("Acme Labs", 2024)["revenue_millions"] == 120.5


def test_rendering_fills_the_data_renames_and_documents_the_tool():
    records = {"oslo": {"city": "Oslo", "population": 700000}, "bergen": {"city": "Bergen", "population": 290000}}
    data = {
        "_TITLE": "Nord Atlas",
        "_WHAT": "town",
        "_PARAM": "town",
        "_LABEL": "city",
        "_RECORDS": records,
        "_FIELDS": ("population",),
    }
    source = render("record_attribute", "nord_town_fact", params={"entity": "town"}, data=data, doc="A town fact.")
    assert 'def nord_town_fact(town: str, attribute: str) -> dict:\n    """A town fact."""' in source
    assert run(source, "nord_town_fact", town="bergen", attribute="population") == {
        "city": "Bergen",
        "attribute": "population",
        "value": 290000,
    }
    with pytest.raises(ValueError, match=r"No town named 'Osloo' in the Nord Atlas\. Did you mean: Oslo\?"):
        run(source, "nord_town_fact", town="Osloo", attribute="population")
    with pytest.raises(ValueError, match="'town' must be a non-empty string"):
        run(source, "nord_town_fact", town=" ", attribute="population")


def test_rendering_refuses_missing_or_unknown_data_and_clashing_names():
    with pytest.raises(TemplateError, match="data slots"):
        render("fx", "x_fx", data={})
    with pytest.raises(TemplateError, match="data slots"):
        render("fx", "x_fx", data={"_USD_PER_UNIT": {"USD": 1}, "_RATES": {}})
    with pytest.raises(TemplateError, match="clashes"):
        render("list_cities", "x_list", params={"country": "found"})
    with pytest.raises(TemplateError, match="docstring"):
        render("age", "calculate_age", doc='bad """ doc')


def test_pure_tools_render_to_the_module_text_itself_with_preludes_inlined():
    source = render("population_density", "calculate_population_density")
    assert source.strip() in open(module("population_density").__file__).read()
    source = render("percentage_change", "calculate_percentage_change")
    assert "def _number(" in source and "import" not in source
    assert run(source, "calculate_percentage_change", 50, 75)["percent_change"] == 50.0
    with pytest.raises(ValueError, match="'new_value' must be a number"):
        run(source, "calculate_percentage_change", 50, "75")


def test_preludes_hold_shared_code_once():
    for name in ("record_profile", "record_attribute", "record_batch"):
        source = render(
            name, f"x_{name}", params={"entity" if name != "record_batch" else "entities": "town"}, data=slots(name)
        )
        assert source.count("def _find(") == 1 and source.count("import difflib") == 1, name
