"""Structural validation: each rule has its own failing example and names the exact field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from env_registry.shape import classify
from env_registry.spec import EnvSpec, GoldenCall, ScenarioType, ToolSpec
from env_registry.structure import Rule, ValidationIssue, check_structure, golden_call_of, parse_record


def test_the_structural_rules_load_without_the_sandbox():
    """The pure rules stand apart from the replay: importing them loads no sandbox module."""
    code = "import sys, env_registry.structure; print(sorted(m for m in sys.modules if 'sandbox' in m))"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.strip() == "[]"


def _pick(envs, stype, min_tools=1):
    return next(e for e in envs if e.scenario_type is stype and len(e.tools) >= min_tools)


@pytest.fixture
def chain(envs):
    """A multi-hop env: q1 -> q2 -> ... with at least two tools."""
    return _pick(envs, ScenarioType.MULTI_HOP, 2)


@pytest.fixture
def fanin(envs):
    """A parallel single-hop env: tool roots and a non-tool comparison leaf."""
    return _pick(envs, ScenarioType.PARALLEL_SINGLE_HOP)


def mutate(env: EnvSpec, fn, rehash: bool = True) -> EnvSpec:
    e = env.model_copy(deep=True)
    fn(e)
    return e.with_id() if rehash else e


def issues_of(env: EnvSpec, rule: Rule):
    return [i for i in check_structure(env) if i.rule is rule]


def only(env: EnvSpec, rule: Rule, field: str | None = None):
    found = check_structure(env)
    assert {i.rule for i in found} == {rule}, [str(i) for i in found]
    if field is not None:
        assert [i.field for i in found] == [field]
    return found[0]


def test_sound_envs_have_no_issues(chain, fanin):
    assert check_structure(chain) == [] and check_structure(fanin) == []


def test_id_hash(chain):
    issue = only(mutate(chain, lambda e: setattr(e, "question", e.question + " Please."), rehash=False), Rule.ID_HASH)
    assert issue.field == "id" and "content hash" in issue.message
    only(mutate(chain, lambda e: setattr(e, "id", ""), rehash=False), Rule.ID_HASH)


def test_non_empty(chain):
    only(
        mutate(chain, lambda e: setattr(e.sub_questions[1], "question", "  ")),
        Rule.NON_EMPTY,
        "sub_questions[1].question",
    )


def test_sub_question_ids_unique(fanin):
    def dup(e):
        e.sub_questions[1].id = e.sub_questions[0].id

    assert issues_of(mutate(fanin, dup), Rule.SUB_QUESTION_IDS_UNIQUE)[0].field == "sub_questions[1].id"


def test_dependency_exists(chain):
    e = mutate(chain, lambda e: e.sub_questions[1].depends_on.append("q99"))
    issue = issues_of(e, Rule.DEPENDENCY_EXISTS)[0]
    assert issue.field == "sub_questions[1].depends_on[1]" and "'q99'" in issue.message


def test_dag_acyclic(chain):
    def cycle(e):
        e.sub_questions[0].depends_on = [e.sub_questions[-1].id]

    issue = issues_of(mutate(chain, cycle), Rule.DAG_ACYCLIC)[0]
    assert "cycle" in issue.message and issue.field == "sub_questions[0].depends_on"
    self_loop = mutate(chain, lambda e: e.sub_questions[0].depends_on.append(e.sub_questions[0].id))
    assert "q1 -> q1" in issues_of(self_loop, Rule.DAG_ACYCLIC)[0].message


def test_non_tool_leaf(chain):
    def untool(e):
        e.sub_questions[0].needs_tool, e.sub_questions[0].tool = False, None

    issue = issues_of(mutate(chain, untool), Rule.NON_TOOL_LEAF)[0]
    assert issue.field == "sub_questions[0]" and "'q2'" in issue.message


def test_hop_level(chain):
    only(
        mutate(chain, lambda e: setattr(e.sub_questions[1], "hop_level", 7)),
        Rule.HOP_LEVEL,
        "sub_questions[1].hop_level",
    )


def test_has_tool_node(chain):
    def no_tools(e):
        e.sub_questions = e.sub_questions[:1]
        e.sub_questions[0].needs_tool, e.sub_questions[0].tool = False, None

    assert issues_of(mutate(chain, no_tools), Rule.HAS_TOOL_NODE)[0].field == "sub_questions"


@pytest.mark.parametrize("bad", ["class", "get-weather", "naïve_tool", "x" * 65])
def test_tool_name_identifier(fanin, bad):
    def rename(e):
        old = e.tools[0].name
        e.tools[0].name = bad
        e.tools[0].source = e.tools[0].source.replace(f"def {old}(", f"def {bad}(")
        for q in e.sub_questions:
            if q.tool == old:
                q.tool = bad

    assert issues_of(mutate(fanin, rename), Rule.TOOL_NAME_IDENTIFIER)[0].field == "tools[0].name"


def test_tool_names_unique(chain):
    e = mutate(chain, lambda e: e.tools.append(e.tools[0].model_copy(deep=True)))
    only(e, Rule.TOOL_NAMES_UNIQUE, f"tools[{len(chain.tools)}].name")


def test_tool_schema_valid(fanin):
    def bad_schema(e):
        e.tools[0].parameters["properties"]["broken"] = {"type": 5}

    issue = issues_of(mutate(fanin, bad_schema), Rule.TOOL_SCHEMA_VALID)[0]
    assert issue.field.startswith("tools[0].parameters") and "JSON Schema" in issue.message


def test_tool_parameters_object(fanin):
    e = mutate(fanin, lambda e: setattr(e.tools[0], "parameters", {"type": "string"}))
    assert issues_of(e, Rule.TOOL_PARAMETERS_OBJECT)[0].field == "tools[0].parameters"


def test_tool_source_syntax(fanin):
    e = mutate(fanin, lambda e: setattr(e.tools[0], "source", e.tools[0].source + "\ndef broken(:\n"))
    assert "line" in only(e, Rule.TOOL_SOURCE_SYNTAX, "tools[0].source").message


def test_tool_source_defines(fanin):
    name = fanin.tools[0].name
    e = mutate(fanin, lambda e: setattr(e.tools[0], "source", e.tools[0].source.replace(f"def {name}(", "def other(")))
    only(e, Rule.TOOL_SOURCE_DEFINES, "tools[0].source")
    e = mutate(
        fanin, lambda e: setattr(e.tools[0], "source", e.tools[0].source.replace(f"def {name}(", f"async def {name}("))
    )
    assert "async" in only(e, Rule.TOOL_SOURCE_DEFINES).message


def test_tool_signature(fanin):
    def extra_prop(e):
        e.tools[0].parameters["properties"]["verbose"] = {"type": "boolean"}

    assert "['verbose']" in only(mutate(fanin, extra_prop), Rule.TOOL_SIGNATURE).message
    tool = ToolSpec(
        name="f",
        description="d",
        parameters={"type": "object", "properties": {"a": {"type": "integer"}}},
        source="def f(a, b):\n    return a + b\n",
    )
    e = mutate(fanin, lambda e: e.tools.append(tool))
    assert "requires ['b']" in only(e, Rule.TOOL_SIGNATURE).message


def test_tool_assignment(chain, fanin):
    only(
        mutate(chain, lambda e: setattr(e.sub_questions[0], "tool", None)),
        Rule.TOOL_ASSIGNMENT,
        "sub_questions[0].tool",
    )
    leaf = len(fanin.sub_questions) - 1
    e = mutate(fanin, lambda e: setattr(e.sub_questions[leaf], "tool", e.tools[0].name))
    assert "needs_tool=false" in only(e, Rule.TOOL_ASSIGNMENT, f"sub_questions[{leaf}].tool").message


def test_tool_exists(chain):
    issue = only(mutate(chain, lambda e: setattr(e.sub_questions[0], "tool", "ghost_tool")), Rule.TOOL_EXISTS)
    assert issue.field == "sub_questions[0].tool" and "'ghost_tool'" in issue.message


def test_golden_present(fanin):
    only(mutate(fanin, lambda e: setattr(e.tools[0], "golden_calls", [])), Rule.GOLDEN_PRESENT, "tools[0].golden_calls")


def test_golden_args_schema(fanin):
    def bad_args(e):
        g = e.tools[0].golden_calls[0]
        e.tools[0].golden_calls[0] = GoldenCall(
            args={**g.args, "undeclared": 1, **{k: 42 for k in list(g.args)[:1]}}, expected=g.expected
        )

    found = issues_of(mutate(fanin, bad_args), Rule.GOLDEN_ARGS_SCHEMA)
    assert found and all(i.field.startswith("tools[0].golden_calls[0].args") for i in found)
    assert any("42" in i.message for i in found)


def test_golden_covers_answer(chain):
    e = mutate(chain, lambda e: setattr(e.sub_questions[0], "answer", "Nowhereville"))
    only(e, Rule.GOLDEN_COVERS_ANSWER, "sub_questions[0].answer")


def test_scenario_type(chain):
    issue = only(mutate(chain, lambda e: setattr(e, "scenario_type", ScenarioType.SINGLE_HOP)), Rule.SCENARIO_TYPE)
    assert issue.field == "scenario_type" and "multi_hop" in issue.message


def test_all_issues_of_an_env_are_reported(chain):
    def three(e):
        e.question = ""
        e.sub_questions[1].depends_on.append("nope")
        e.tools[0].golden_calls = []

    rules = {i.rule for i in check_structure(mutate(chain, three))}
    assert {Rule.NON_EMPTY, Rule.DEPENDENCY_EXISTS, Rule.GOLDEN_PRESENT} <= rules


def test_classify_definitions():
    assert classify(0, 0) is None
    assert classify(1, 1) is ScenarioType.SINGLE_HOP
    assert classify(3, 3) is ScenarioType.MULTI_HOP
    assert classify(3, 1) is ScenarioType.PARALLEL_SINGLE_HOP
    assert classify(4, 2) is ScenarioType.PARALLEL_MULTI_HOP


def test_parse_record(chain):
    spec, issues = parse_record(chain.to_json())
    assert spec == chain and issues == []
    d = json.loads(chain.to_json())
    d["id"] = ""
    spec, _ = parse_record(json.dumps(d))
    assert spec.id == chain.id  # an empty id is filled with the content hash
    _, issues = parse_record("{not json")
    assert [i.rule for i in issues] == [Rule.PARSE]
    del d["sub_questions"][0]["answer"]
    d["tools"][0]["parameters"] = "oops"
    _, issues = parse_record(json.dumps(d))
    assert {i.field for i in issues} == {"sub_questions[0].answer", "tools[0].parameters"}
    assert all(i.rule is Rule.PARSE for i in issues)


@pytest.mark.parametrize(
    "edit",
    [
        lambda t: setattr(t, "description", " "),
        lambda t: setattr(t, "name", "class"),
        lambda t: setattr(t, "parameters", {"type": "array"}),
        lambda t: setattr(t, "source", "def other(x):\n    return x\n"),
        lambda t: setattr(t, "source", "def broken(:\n"),
        lambda t: t.golden_calls.append(GoldenCall(args={"no_such_parameter": 1}, expected="x")),
    ],
)
def test_check_tool_applies_the_same_rules_as_check_structure(fanin, edit):
    import ast

    from env_registry.structure import check_tool

    env = mutate(fanin, lambda e: edit(e.tools[0]))
    tool = env.tools[0]
    in_env = [(i.field, i.rule, i.message) for i in check_structure(env) if i.field.startswith("tools[0]")]
    alone = [(i.field, i.rule, i.message) for i in check_tool(tool)]
    assert in_env and alone == in_env
    try:
        tree = ast.parse(tool.source)
    except SyntaxError:
        return
    assert [(i.field, i.rule, i.message) for i in check_tool(tool, tree=tree)] == in_env


def test_golden_call_of_reads_the_replay_issue_location():
    # the location travels typed, as replay_env records it (test_replay checks that it does)
    def issue(where, golden_call=None):
        return ValidationIssue("e", where, Rule.REPLAY_MISMATCH, "m", golden_call)

    assert golden_call_of(issue("tools[3].golden_calls[12]", (3, 12))) == (3, 12)
    assert golden_call_of(issue("tools[3].golden_calls[1].args['x']")) is None
    assert golden_call_of(issue("tools")) is None
