"""Builders for rollout tests: hand-written environments in a real store, loop construction.

The environments are small and written out here so each test can see exactly what the tools
do (a lookup, a stateful counter, a tool that raises, one that loops forever).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from env_registry.rows import RowInfo, ToolRef
from env_registry.spec import EnvSpec, GoldenCall, Provenance, ScenarioType, SubQuestion, ToolSpec

POPULATION = """
_DATA = {"paris": 2161000, "lyon": 513275, "nice": 342669}


def get_population(city):
    key = str(city).strip().lower()
    if key not in _DATA:
        raise ValueError(f"unknown city {city!r}")
    return {"city": key, "population": _DATA[key]}
"""

AREA = """
def get_area(city, unit="km2"):
    areas = {"paris": 105.4, "lyon": 47.87}
    value = areas[str(city).lower()]
    return {"city": city, "area": value if unit == "km2" else round(value * 0.386102, 3), "unit": unit}
"""

COUNTER = """
_count = 0


def bump_counter(step=1):
    global _count
    _count += step
    return {"count": _count}
"""

RAISES = """
def always_fails(x):
    raise RuntimeError("backend unavailable")
"""

SPINS = """
def spin_forever(x):
    while True:
        pass
"""


def tool(name: str, source: str, props: dict, required: list[str], description: str = "", **golden) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description or f"{name.replace('_', ' ')}",
        parameters={"type": "object", "properties": props, "required": required, "additionalProperties": False},
        source=source,
        golden_calls=[GoldenCall(**golden)] if golden else [],
    )


def city_env() -> EnvSpec:
    """Two sub-questions (population of Paris, area of Paris) and a leaf; tools get_population, get_area."""
    return EnvSpec.create(
        domain="geography",
        question="What is the population density of Paris?",
        final_answer="20503",
        scenario_type=ScenarioType.PARALLEL_MULTI_HOP,
        sub_questions=[
            SubQuestion(id="q1", question="Population of Paris?", answer="2161000", tool="get_population"),
            SubQuestion(id="q2", question="Area of Paris in km2?", answer="105.4", tool="get_area"),
            SubQuestion(id="q3", question="Density?", answer="20503", depends_on=["q1", "q2"], needs_tool=False),
        ],
        tools=[
            tool(
                "get_population",
                POPULATION,
                {"city": {"type": "string", "description": "city name"}},
                ["city"],
                "Population of a city",
                args={"city": "Paris"},
                expected="2161000",
            ),
            tool(
                "get_area",
                AREA,
                {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["km2", "mi2"]}},
                ["city"],
                "Surface area of a city",
                args={"city": "Paris"},
                expected="105.4",
            ),
        ],
        provenance=Provenance(generator="test"),
    )


def counter_env() -> EnvSpec:
    """A stateful tool (module-level counter), a tool that raises and one that never returns."""
    return EnvSpec.create(
        domain="tally",
        question="Bump the counter twice; what is it?",
        final_answer="2",
        scenario_type=ScenarioType.MULTI_HOP,
        sub_questions=[
            SubQuestion(id="c1", question="Counter after one bump?", answer="1", tool="bump_counter"),
            SubQuestion(id="c2", question="Counter after two bumps?", answer="2", tool="bump_counter"),
        ],
        tools=[
            tool("bump_counter", COUNTER, {"step": {"type": "integer", "minimum": 1}}, [], "Add to the counter"),
            tool("always_fails", RAISES, {"x": {"type": "string"}}, ["x"], "A flaky backend"),
            tool("spin_forever", SPINS, {"x": {"type": "string"}}, ["x"], "Never returns"),
        ],
        provenance=Provenance(generator="test"),
    )


def weather_env() -> EnvSpec:
    """Another domain, with a tool named like one of city_env's (for collision tests)."""
    src = 'def get_forecast(city):\n    return {"city": city, "forecast": "rain"}\n'
    clash = 'def get_area(city):\n    return {"city": city, "area": "CLASH"}\n'
    return EnvSpec.create(
        domain="weather",
        question="Will it rain in Lyon?",
        final_answer="rain",
        scenario_type=ScenarioType.SINGLE_HOP,
        sub_questions=[SubQuestion(id="w1", question="Forecast for Lyon?", answer="rain", tool="get_forecast")],
        tools=[
            tool("get_forecast", src, {"city": {"type": "string"}}, ["city"], "Weather forecast for a city"),
            tool("get_area", clash, {"city": {"type": "string"}}, ["city"], "Area covered by a forecast"),
        ],
        provenance=Provenance(generator="test"),
    )


def write_store(path: Path, specs: list[EnvSpec]) -> str:
    from env_registry.store import EnvStore

    with EnvStore.open(path, "a", durable=False) as store:
        store.add_many(specs)
    return str(path)


def row_kwargs(spec: EnvSpec, store: str, tools: list[ToolRef] | None = None, interaction: dict | None = None):
    """The kwargs verl passes to `loop.run` for a row of this environment."""
    info = RowInfo(env_id=spec.id, store=store, tools=tools or [ToolRef(spec.id, t.name) for t in spec.tools])
    extra_info = {"index": 0, "astra": info.to_json()}
    if interaction is not None:
        extra_info["interaction_kwargs"] = interaction
    return {
        "raw_prompt": [{"role": "user", "content": spec.question}],
        "extra_info": extra_info,
        "interaction_kwargs": interaction or {},
        "tools_kwargs": {},
        "index": 0,
    }


def call_text(name: str, args) -> str:
    import json

    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


@pytest.fixture(scope="session")
def envs(tmp_path_factory) -> SimpleNamespace:
    """A store holding city_env, counter_env and weather_env."""
    city, counter, weather = city_env(), counter_env(), weather_env()
    store = write_store(tmp_path_factory.mktemp("rollout-store") / "store", [city, counter, weather])
    return SimpleNamespace(store=store, city=city, counter=counter, weather=weather)


@pytest.fixture(scope="session")
def kit() -> SimpleNamespace:
    return SimpleNamespace(row_kwargs=row_kwargs, call_text=call_text, write_store=write_store, tool=tool)


@pytest.fixture(scope="module")
def trainer_config(tiny_model_dir):
    """Factory: verl's ppo_trainer config for the tiny model plus overrides."""
    from astra_verl.rollout.testing import compose_trainer_config

    base = [
        "actor_rollout_ref.rollout.prompt_length=2048",
        "actor_rollout_ref.rollout.response_length=1024",
        "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=4",
        "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=512",
        "actor_rollout_ref.rollout.multi_turn.format=hermes",
        "+astra.sandbox.call_timeout_s=2",
    ]

    def make(*overrides: str):
        return compose_trainer_config(str(tiny_model_dir), [*base, *overrides])

    return make
