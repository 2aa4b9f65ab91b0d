"""Pure parts of environment synthesis: traces, calls, schemas, code checks, seeds, scores, prompts."""

import json
from pathlib import Path

import pytest

from astra_foundation.llm import ReplyError
from data_synth.env.calls import parse_call, schema_problems, ungrounded_values
from data_synth.env.code import check_scaled, check_schema, code_problems
from data_synth.env.necessity import check_legitimate, parse_labels
from data_synth.env.records import QA, Necessity, Seed
from data_synth.env.seeds import SeedError, load_seeds, parse_hops, sample_input
from data_synth.env.trace import parse_trace
from data_synth.env.verify import quality_threshold, score_completeness, score_dependency, score_flags
from data_synth.pipeline import Reject
from data_synth.prompts import PROMPT_DIR, PromptError, load_prompt, parse_prompt


def _trace(*nodes, **top):
    return {"question": "Q?", "final_answer": "A", "trace": list(nodes), **top}


def _n(uid, deps=None, answer="42", level=None):
    return {
        "_uuid": uid,
        "hop_level": level,
        "sub_question": f"what is {uid}?",
        "sub_answer": answer,
        "dependency": deps,
    }


def test_trace_parses_and_recomputes_levels():
    q, a, claimed, nodes, notes = parse_trace(
        _trace(_n("b", ["a"], level=1), _n("a", level=1), _n("c", "a", level=2), scenario_type="multi_hop"),
        hop_min=1,
        hop_max=5,
    )
    assert [n.id for n in nodes] == ["a", "b", "c"]  # topological order
    assert [n.hop_level for n in nodes] == [1, 2, 2] and nodes[2].depends_on == ["a"]
    assert nodes[1].is_parallel and nodes[2].is_parallel and not nodes[0].is_parallel
    assert "b: hop_level 1 -> 2" in notes and claimed == "multi_hop"


@pytest.mark.parametrize(
    "value, kind",
    [
        ({"trace": "nope"}, "not_a_trace"),
        (_trace(), "not_a_trace"),
        (_trace(_n("a"), _n("a")), "duplicate_ids"),
        (_trace(_n("a", ["zz"])), "unknown_dependency"),
        (_trace(_n("a", ["b"]), _n("b", ["a"])), "cyclic"),
        (_trace(_n("a", ["a"])), "cyclic"),
        (_trace(_n("a", answer="")), "empty_answer"),
        (_trace(_n("a", answer="the answer is " + "very " * 30)), "answer_not_value"),
        (_trace(_n("a"), _n("b"), _n("c"), _n("d"), _n("e"), _n("f")), "hops_out_of_range"),
        ({"question": "", "final_answer": "x", "trace": [_n("a")]}, "empty_answer"),
    ],
)
def test_trace_errors(value, kind):
    with pytest.raises(ReplyError) as e:
        parse_trace(value, hop_min=1, hop_max=5)
    assert e.value.kind == kind


def test_calls_are_parsed_safely():
    assert parse_call('get_weather(city="Paris", days=3, metric=true, tags=["a"], opt=None)') == (
        "get_weather",
        {"city": "Paris", "days": 3, "metric": True, "tags": ["a"], "opt": None},
    )
    assert parse_call("print(f(x=(1, 2)))")[1] == {"x": [1, 2]}
    assert parse_call("```\nf(x={'k': -1.5})\n```")[1] == {"x": {"k": -1.5}}
    for bad in [
        'f(x=__import__("os").system("id"))',
        "f(x=open('/etc/passwd').read())",
        "f(1, 2)",
        "f(**{'a': 1})",
        "f(x={1, 2})",
        "f(x=y)",
        "obj.f(x=1)",
        "f(x=1); g(y=2)",
        "lambda: 0",
        "f(x=" + "[" * 200 + "]" * 200 + ")",
        "",
    ]:
        with pytest.raises(ReplyError) as e:
            parse_call(bad)
        assert e.value.kind == "bad_call", bad
    with pytest.raises(ReplyError, match="the tool is 'g'"):
        parse_call("f(x=1)", name="g")


def test_call_arguments_against_schema_and_request():
    params = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city"],
    }
    assert schema_problems({"city": "Lyon"}, params) == []
    assert schema_problems({"unit": "k"}, params)  # missing city, bad enum
    assert ungrounded_values({"city": "Lyon", "unit": "f"}, params, "What is the weather in lyon?") == []
    assert ungrounded_values({"city": "Paris"}, params, "What is the weather in Lyon?") == ["city='Paris'"]


SCHEMA = {
    "name": "get_temp",
    "description": "temperature",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_schema_checks():
    assert check_schema({"type": "function", "function": SCHEMA})["name"] == "get_temp"
    for bad in [
        {**SCHEMA, "name": "get temp"},
        {**SCHEMA, "name": "class"},
        {**SCHEMA, "description": ""},
        {**SCHEMA, "parameters": {"type": "array"}},
        {**SCHEMA, "parameters": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}},
        {**SCHEMA, "parameters": {"type": "object", "properties": {"a": {"type": 7}}}},
        [],
    ]:
        with pytest.raises(ReplyError) as e:
            check_schema(bad)
        assert e.value.kind == "bad_schema"
    scaled = json.loads(json.dumps(SCHEMA))
    scaled["parameters"]["properties"]["unit"] = {"type": "string", "enum": ["c", "f"]}
    assert check_scaled(scaled, SCHEMA)["parameters"]["properties"]["unit"]
    breaking = json.loads(json.dumps(scaled))
    breaking["parameters"]["required"] = ["city", "unit"]
    for bad in [breaking, {**SCHEMA, "name": "other"}, {**SCHEMA, "parameters": {"type": "object", "properties": {}}}]:
        with pytest.raises(ReplyError) as e:
            check_scaled(bad, SCHEMA)
        assert e.value.kind == "not_compatible"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def get_temp(city):\n    return {'t': 1}\n", None),
        ("import os\ndef get_temp(city):\n    return os.listdir('/')\n", "imports 'os'"),
        ("def get_temp(city):\n    return eval(city)\n", "uses eval()"),
        ("def get_temp(city:\n", "syntax error"),
        ("def other(city):\n    return 1\n", "defines no top-level callable"),
        ("def get_temp(town):\n    return 1\n", "not parameters of get_temp()"),
        ("async def get_temp(city):\n    return 1\n", "async def"),
    ],
)
def test_code_problems(source, expected):
    problems = code_problems(source, SCHEMA, [({"city": "Lyon"}, "1")])
    if expected is None:
        assert problems == []
    else:
        assert any(expected in p for p in problems), problems


def test_seeds_from_every_mode():
    """The bundled sample inputs, one per mode, in ASTRA's formats."""
    ctx = load_seeds("context", sample_input("context"), limit=3, samples=2)
    assert len(ctx) == 6 and ctx[0].hop_min == 3 and ctx[0].hop_max == 5 and ctx[0].domain == "weather"
    assert ctx[0].key.endswith(":0") and ctx[1].key.endswith(":1") and ctx[0].target_type is None
    assert "Information Needed:" in ctx[0].text
    assert load_seeds("context", sample_input("context"), limit=3, samples=2) == ctx  # stable keys
    doms = load_seeds("domain", sample_input("domain"), hops=(2, 4))
    assert len(doms) == 12 and {d.target_type for d in doms} == {
        "single_hop",
        "multi_hop",
        "parallel_single_hop",
        "parallel_multi_hop",
    }
    qs = load_seeds("question", sample_input("question"), offset=2, limit=1)
    assert qs[0].source == "questions.jsonl:3" and qs[0].domain == "flights"
    tax = load_seeds("taxonomy", sample_input("taxonomy"))
    assert [(t.domain, t.category) for t in tax] == [
        ("weather", "forecast"),
        ("weather", "air quality"),
        ("travel", "flights/status"),
    ]
    assert tax[0].examples == ["Will it rain in Rotterdam on Sunday morning?"]
    zh = load_seeds("domain", sample_input("domain", "zh"), language="zh", limit=1)
    assert zh[0].language == "zh" and zh[0].domain.startswith("天气")
    with pytest.raises(SeedError, match="no bundled sample for context mode in language 'zh'"):
        sample_input("context", "zh")


def test_seed_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"domain": "x", "knowledge_corpus": "y"}\n{not json\n')
    with pytest.raises(SeedError, match="bad.jsonl:2"):
        load_seeds("context", bad)
    bad.write_text('{"domain": 3, "question": "q"}\n')
    with pytest.raises(SeedError, match="'domain' must be a string"):
        load_seeds("question", bad)
    with pytest.raises(SeedError, match="does not exist"):
        load_seeds("context", tmp_path / "missing.jsonl")
    with pytest.raises(SeedError, match="MIN..MAX"):
        parse_hops("3-5")


def _qa():
    seed = Seed(key="k", mode="domain", domain="d", text="", hop_min=1, hop_max=5, source="t:1")
    _, _, _, nodes, _ = parse_trace(_trace(_n("q1"), _n("q2"), _n("q3", ["q1", "q2"])), hop_min=1, hop_max=5)
    return QA(key="k", seed=seed, question="Q?", final_answer="A", nodes=nodes)


def test_necessity_labels_and_legitimacy():
    qa = _qa()
    ids = ["q1", "q2", "q3"]
    labels = parse_labels({"labels": [{"_uuid": i, "tool_necessity": i != "q3", "reason": ""} for i in ids]}, ids)
    check_legitimate(qa, labels)  # the non-tool step is a leaf: fine
    for bad, kind in [
        ({"labels": [{"_uuid": "q1", "tool_necessity": True}]}, "missing_ids"),
        ({"labels": [{"_uuid": "zz", "tool_necessity": True}]}, "unknown_id"),
        ({"labels": [{"_uuid": "q1", "tool_necessity": "yes"}]}, "wrong_keys"),
        ({"verdicts": []}, "wrong_keys"),
    ]:
        with pytest.raises(ReplyError) as e:
            parse_labels(bad, ids)
        assert e.value.kind == kind
    with pytest.raises(Reject) as e:
        check_legitimate(qa, {**labels, "q1": Necessity(needs_tool=False)})
    assert e.value.reason == "non_tool_internal_node"
    with pytest.raises(Reject) as e:
        check_legitimate(qa, {i: Necessity(needs_tool=False) for i in ids} | {"q1": Necessity(needs_tool=True)})
    assert e.value.reason == "non_tool_internal_node"


def test_judge_scores():
    nodes = _qa().nodes
    dep = {
        "nodes": [
            {"_uuid": "q1", "missing": [], "redundant": []},
            {"_uuid": "q2", "missing": ["q1"], "redundant": []},
            {"_uuid": "q3", "missing": [], "redundant": ["q2"]},
        ]
    }
    score, issues = score_dependency(dep, nodes)
    assert score == pytest.approx(1 / 3) and len(issues) == 2
    with pytest.raises(ReplyError):  # q1 lists no dependency, so none can be redundant
        score_dependency({"nodes": [{"_uuid": "q1", "redundant": ["q2"]}, *dep["nodes"][1:]]}, nodes)
    atomic = {"nodes": [{"_uuid": i, "atomic": i != "q2"} for i in ("q1", "q2", "q3")]}
    assert score_flags(atomic, ["q1", "q2", "q3"], "atomicity", "atomic")[0] == pytest.approx(2 / 3)
    with pytest.raises(ReplyError) as e:
        score_flags({"nodes": atomic["nodes"][:2]}, ["q1", "q2", "q3"], "atomicity", "atomic")
    assert e.value.kind == "missing_ids"
    assert score_completeness({"covers_question": True, "answer_follows": False})[0] == 0.5
    assert quality_threshold([0.5, 0.75, 1.0, 1.0], percentile=50) == 0.875
    assert quality_threshold([0.2, 0.3], percentile=0, min_quality=0.85) == 0.85
    assert quality_threshold([], percentile=90) == 0.0


def test_prompt_files_load_and_render():
    names = sorted(p.relative_to(PROMPT_DIR).with_suffix("").as_posix() for p in (PROMPT_DIR / "env").glob("*.md"))
    assert names == ["env/decompose", "env/merge", "env/necessity", "env/tool", "env/verify"]
    for name in names:
        p = load_prompt(name)
        assert p.tag == f"{p.name}@{p.version}" and "system" in p.sections
    msgs = load_prompt("env/necessity").messages("user", question="Q", trace="{}")
    assert msgs[0]["role"] == "system" and "Main question: Q" in msgs[1]["content"]
    with pytest.raises(PromptError, match="needs variable 'trace'"):
        load_prompt("env/necessity").render("user", question="Q")
    with pytest.raises(PromptError, match="version"):
        parse_prompt("---\nname: x\n---\n## system\nhi\n", Path("x.md"))
    stripped = parse_prompt("---\nname: x\nversion: 1\nstrip: true\n---\n## user\n\n  $a  \n\n", Path("x.md"))
    plain = parse_prompt("---\nname: x\nversion: 1\n---\n## user\n\n  $a  \n\n", Path("x.md"))
    assert stripped.render("user", a=" v ") == "v" and plain.render("user", a=" v ") == "   v   \n"
    with pytest.raises(PromptError, match="strip"):
        parse_prompt("---\nname: x\nversion: 1\nstrip: yes\n---\n## user\nhi\n", Path("x.md"))
