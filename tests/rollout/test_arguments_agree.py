"""Every check of a tool's arguments gives the same verdict on the same schema, formats included:
the rollout's check of a model call, environment validation of a golden call, and the two
synthesis pipelines (environment calls, trajectory agent calls)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from astra_foundation.llm.types import ToolCall
from astra_verl.rollout.toolset import ToolCatalog
from data_synth.env.calls import schema_problems
from data_synth.traj.interact import check_call
from data_synth.traj.records import ToolDoc
from env_registry.rows import RowInfo, ToolRef
from env_registry.spec import EnvSpec, GoldenCall, Provenance, ScenarioType, SubQuestion
from env_registry.structure import Rule, check_tool

PARAMS = {
    "type": "object",
    "properties": {"day": {"type": "string", "format": "date"}, "host": {"type": "string", "format": "ipv4"}},
    "required": ["day"],
    "additionalProperties": False,
}
SOURCE = "def book_day(day, host='10.0.0.1'):\n    return {'day': day}\n"
CASES = [
    ({"day": "2024-02-29"}, True),
    ({"day": "2024-02-30"}, False),  # not a date: only a format checker says so
    ({"day": "tomorrow"}, False),
    ({"day": "2024-01-01", "host": "10.0.0.300"}, False),
    ({"day": "2024-01-01", "host": "10.0.0.3"}, True),
    ({"day": 3}, False),
]


def env(kit) -> EnvSpec:
    return EnvSpec.create(
        domain="calendar",
        question="Book 2024-02-29.",
        final_answer="2024-02-29",
        scenario_type=ScenarioType.SINGLE_HOP,
        sub_questions=[SubQuestion(id="q1", question="Book it", answer="2024-02-29", tool="book_day")],
        tools=[kit.tool("book_day", SOURCE, PARAMS["properties"], ["day"], "Book a day")],
        provenance=Provenance(generator="test"),
    )


@pytest.fixture(scope="module")
def rollout_tool(kit, tmp_path_factory):
    spec = env(kit)
    store = kit.write_store(tmp_path_factory.mktemp("args") / "store", [spec])
    row = RowInfo(env_id=spec.id, store=store, tools=[ToolRef(spec.id, "book_day")])
    return spec, ToolCatalog().toolset(row).tools["book_day"]


@pytest.mark.parametrize("args, ok", CASES)
def test_model_calls_golden_calls_and_synthesis_agree(kit, rollout_tool, args, ok):
    spec, tool = rollout_tool
    golden = spec.tools[0].model_copy(update={"golden_calls": [GoldenCall(args=args, expected="x")]})
    verdicts = {
        "rollout": tool.check(args) is None,
        "golden": not [i for i in check_tool(golden) if i.rule is Rule.GOLDEN_ARGS_SCHEMA],
        "env synthesis": not schema_problems(args, PARAMS),
        "trajectory synthesis": check_call(
            ToolCall(id="c", name="book_day", arguments=json.dumps(args), args=args),
            SimpleNamespace(
                tool_names=lambda: ["book_day"], tool=lambda n: ToolDoc(name="book_day", parameters=PARAMS)
            ),
        )[1]
        is None,
    }
    assert verdicts == dict.fromkeys(verdicts, ok)
