"""Importing ASTRA's released environment data: the field mapping, every defect kind rejected
with its reason, and the command end to end on our own fixtures in ASTRA's formats."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from env_registry.calls import CallStatementError, parse_call_statement
from env_registry.cli import main
from env_registry.importers.astra import convert
from env_registry.importers.sources import read_rows
from env_registry.spec import ScenarioType
from env_registry.store import EnvStore
from env_registry.structure import Rule, check_structure
from env_registry.validate import validate_envs

DATA = Path(__file__).parent / "data"
PIPELINE = DATA / "astra_env_synthesis.jsonl"
RL_ROWS = DATA / "astra_rl_1k.jsonl"


def _records(path: Path) -> dict[str, dict]:
    return {r.data.get("uuid", f"row{r.where}"): r.data for r in read_rows(path)}


def _rules(issues) -> list[Rule]:
    return [i.rule for i in issues]


@pytest.fixture(scope="module")
def pipeline():
    return _records(PIPELINE)


def test_a_step4_record_maps_onto_an_environment(pipeline):
    c = convert(pipeline["astra-fixture-chain"], "f.jsonl:1")
    env = c.spec
    assert c.format == "pipeline" and c.issues == [] and check_structure(env) == []
    assert [(q.id, q.depends_on, q.needs_tool, q.tool) for q in env.sub_questions] == [
        ("1", [], True, "product_price_lookup"),
        ("2", ["1"], True, "order_total_calculator"),
        ("3", ["2"], False, None),
    ]
    price, total = env.tools
    assert price.golden_calls[0].args == {"product_name": "Aurora desk lamp"}
    assert price.golden_calls[0].expected == "34.99"  # the sub-answer, not the printed repr in tool_call_ans
    assert total.golden_calls[0].args == {"unit_price": 34.99, "quantity": 3}  # through print(...), doc as JSON text
    assert env.scenario_type is ScenarioType.MULTI_HOP and env.final_answer == "104.97 EUR"
    assert env.domain == "Shopping" and env.language == "en"
    assert env.provenance.generator == "astra_import" and env.provenance.source == "f.jsonl:1 uuid=astra-fixture-chain"
    assert env.id == env.content_hash()


def test_step5_merged_entries_become_one_tool_and_positional_calls_are_named(pipeline):
    env = convert(pipeline["astra-fixture-merged"], "f").spec
    assert [t.name for t in env.tools] == ["city_weather_lookup", "temperature_difference"]
    weather, diff = env.tools
    assert [g.args for g in weather.golden_calls] == [{"city": "Lisbon"}, {"city": "Porto"}]
    assert diff.golden_calls[0].args == {"first": 21.5, "second": 17.0}  # `temperature_difference(21.5, 17.0)`
    assert env.scenario_type is ScenarioType.PARALLEL_MULTI_HOP and check_structure(env) == []


@pytest.mark.parametrize(
    "uuid, rule, where",
    [
        ("astra-fixture-duplicate-names", Rule.TOOL_NAMES_UNIQUE, "tools[1].name"),
        (
            "astra-fixture-bad-call",
            Rule.CALL_STATEMENT,
            "env_result['1'].env_synthesis_result.data.tool_call_statement",
        ),
        ("astra-fixture-missing-dependency", Rule.DEPENDENCY_EXISTS, "sub_questions[1].depends_on[1]"),
    ],
)
def test_structural_defects_are_found_before_any_code_runs(pipeline, uuid, rule, where):
    c = convert(pipeline[uuid], "f")
    issues = c.issues + check_structure(c.spec)
    assert (issues[0].rule, issues[0].field) == (rule, where), [str(i) for i in issues]


def test_call_statements_are_parsed_never_evaluated():
    with pytest.raises(CallStatementError, match="not a literal"):
        parse_call_statement("f(x=__import__('os').system('touch /tmp/owned'))")
    with pytest.raises(CallStatementError, match="does not parse"):
        parse_call_statement('f(amount=1, from="USD")')
    with pytest.raises(CallStatementError, match="by keyword"):
        parse_call_statement("f(1, 2)")
    assert parse_call_statement("f(1, b=[1, {'k': None}])", positional=["a", "b"]) == (
        "f",
        {"a": 1, "b": [1, {"k": None}]},
    )
    with pytest.raises(CallStatementError, match="given twice"):
        parse_call_statement("f(1, a=2)", positional=["a"])


def test_format_problems_name_the_field(pipeline):
    rec = json.loads(json.dumps(pipeline["astra-fixture-chain"]))
    del rec["env_result"]["1"]["env_synthesis_result"]["data"]["tool_document"]["description"]
    rec["decomposition_trace"][1]["dependency"] = {"id": 1}
    issues = convert(rec, "f").issues
    assert {(i.rule, i.field) for i in issues} == {
        (Rule.IMPORT_FORMAT, "env_result['1'].env_synthesis_result.data.tool_document"),
        (Rule.IMPORT_FORMAT, "decomposition_trace[1].dependency"),
    }
    del rec["main_question"]
    (issue,) = convert(rec, "f").issues
    assert (issue.rule, issue.field) == (Rule.IMPORT_FORMAT, "main_question")
    (issue,) = convert({"messages": []}, "f").issues
    assert issue.rule is Rule.IMPORT_FORMAT and "not an ASTRA record" in issue.message


def test_rl_1k_rows_are_checked_and_say_why_they_cannot_be_imported():
    first, second = (convert(r.data, r.label) for r in read_rows(RL_ROWS))
    assert first.format == "rl_1k" and first.spec is None
    assert first.issues[0].rule is Rule.TOOL_NAMES_UNIQUE and "payment_processor" in first.issues[0].message
    assert Rule.TOOL_SIGNATURE in _rules(first.issues)  # the one implementation kept does not fit the first schema
    assert _rules(second.issues) == [Rule.GOLDEN_PRESENT]  # sound tools, but no call statements to replay
    assert "no call statements" in second.issues[0].message
    row = json.loads(RL_ROWS.read_text().splitlines()[1])
    row["tool_dict"] = '{"city_weather_lookup": "def city_weather_lookup(city): ...", "city_weather_lookup": "x"}'
    issue = convert(row, "f").issues[0]
    assert issue.rule is Rule.IMPORT_FORMAT and "more than once" in issue.message


def _run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_import_astra_end_to_end(tmp_path, capsys):
    store = str(tmp_path / "store")
    rejects = tmp_path / "rejects.jsonl"
    code, out = _run(  # golden-call recovery of RL-1k rows: tests/env_registry/test_import_astra_rl.py
        capsys,
        "--store",
        store,
        "-q",
        "import-astra",
        str(PIPELINE),
        str(RL_ROWS),
        "--rejects",
        str(rejects),
        "--no-recovery",
    )
    assert code == 1, out
    assert "read 8 ASTRA records" in out and "imported 2 environments, 0 already in the store, rejected 6" in out
    assert "rejected records by rule:" in out
    found = {}
    for line in rejects.read_text().splitlines():
        r = json.loads(line)
        key = json.loads(r["record"]).get("uuid") or f"rl{r['line']}"
        found[key] = r["issues"][0]
    assert {k: v["rule"] for k, v in found.items()} == {
        "astra-fixture-duplicate-names": "tool_names_unique",
        "astra-fixture-random-id": "determinism",
        "astra-fixture-bad-call": "call_statement",
        "astra-fixture-missing-dependency": "dependency_exists",
        "rl1": "tool_names_unique",
        "rl2": "golden_present",
    }
    shown = found["astra-fixture-random-id"]["message"]
    assert (
        shown.count("Transaction ID: TXN") == 2
        and found["astra-fixture-random-id"]["field"] == "tools[1].golden_calls[0]"
    )
    imported = list(EnvStore.open(store))
    assert sorted(e.provenance.source.split("uuid=")[1] for e in imported) == [
        "astra-fixture-chain",
        "astra-fixture-merged",
    ]
    assert validate_envs(imported, progress=False).ok  # what was imported validates on its own
    code, out = _run(
        capsys, "--store", store, "-q", "import-astra", str(PIPELINE), "--rejects", str(tmp_path / "r2.jsonl")
    )
    assert "imported 0 environments, 2 already in the store" in out  # a rerun adds nothing twice


def test_parquet_rows_and_broken_lines_are_located(tmp_path, capsys):
    rows = [json.loads(line) for line in RL_ROWS.read_text().splitlines()]
    parquet = tmp_path / "rl.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    broken = tmp_path / "mixed.jsonl"
    broken.write_text(PIPELINE.read_text().splitlines()[0] + "\n{not json\n[1, 2]\n")
    rejects = tmp_path / "rejects.jsonl"
    argv = ["--store", str(tmp_path / "s"), "-q", "import-astra", str(parquet), str(broken), "--rejects", str(rejects)]
    code, out = _run(capsys, *argv, "--no-recovery")
    assert code == 1 and "imported 1 environments" in out and "rejected 4" in out
    located = [
        (Path(r["file"]).name, r.get("row", r.get("line")), r["issues"][0]["rule"])
        for r in map(json.loads, rejects.read_text().splitlines())
    ]
    assert located == [
        ("rl.parquet", 0, "tool_names_unique"),
        ("rl.parquet", 1, "golden_present"),
        ("mixed.jsonl", 2, "import_format"),
        ("mixed.jsonl", 3, "import_format"),
    ]
    (tmp_path / "x.csv").write_text("a,b\n")
    assert main(["--store", str(tmp_path / "s"), "import-astra", str(tmp_path / "x.csv")]) == 2
    assert "not a .json, .jsonl or .parquet file" in capsys.readouterr().err


def test_a_json_list_of_step5_records_is_imported_element_by_element(tmp_path, capsys, pipeline):
    merged = tmp_path / "step5_merged.json"
    broken = json.loads(json.dumps(pipeline["astra-fixture-merged"]))
    broken["env_result"]["3"]["env_synthesis_result"]["data"]["tool_call_statement"] = "temperature_difference(*[1, 2])"
    merged.write_text(json.dumps([pipeline["astra-fixture-merged"], broken, "not a record"]))
    rejects = tmp_path / "rejects.jsonl"
    argv = ["--store", str(tmp_path / "s"), "-q", "import-astra", str(merged), "--rejects", str(rejects)]
    code, out = _run(capsys, *argv)  # replayed twice in the sandbox, like any import
    assert code == 1 and "imported 1 environments" in out and "rejected 2" in out
    (env,) = EnvStore.open(tmp_path / "s")
    assert env.provenance.source == f"{merged}[element 0] uuid=astra-fixture-merged"
    assert [len(t.golden_calls) for t in env.tools] == [2, 1]  # the merged tool answers both cities
    rows = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [(r["element"], r["issues"][0]["rule"]) for r in rows] == [(1, "call_statement"), (2, "import_format")]
    assert json.loads(rows[0]["record"]) == broken  # the record itself, next to where it was
    assert "*args" in rows[0]["issues"][0]["message"]


SYNTHESIS_INPUTS = {
    "domain": {"domain": "Logistics", "knowledge_corpus": ""},
    "context": {"domain": "weather", "knowledge_corpus": "background: a rooftop party. Information Needed: sunset"},
    "question": {"question": "How far is Porto from Lisbon by train?", "domain": "travel"},
    "taxonomy": {"weather": {"forecast": {"description": "Query forecasts", "examples": [{"query": "Rain?"}]}}},
}


@pytest.mark.parametrize("mode", SYNTHESIS_INPUTS)
def test_inputs_of_astras_synthesis_are_rejected_with_the_command_that_uses_them(mode):
    c = convert(SYNTHESIS_INPUTS[mode], "f")
    assert c.format == f"synthesis_input ({mode})" and c.spec is None
    (issue,) = c.issues
    assert issue.rule is Rule.IMPORT_FORMAT and "not an environment" in issue.message
    assert f"data_synth env run --mode {mode} --input FILE" in issue.message


def test_rejects_go_beside_the_store_not_into_the_release_folder(tmp_path, capsys):
    release = tmp_path / "astra" / "env_synthesis" / "data"
    release.mkdir(parents=True)
    lines = [SYNTHESIS_INPUTS[m] for m in ("domain", "context", "question")]
    (release / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    (release / "taxonomy.json").write_text(json.dumps(SYNTHESIS_INPUTS["taxonomy"]))
    before = sorted(p.name for p in release.iterdir())
    store = tmp_path / "runs" / "store"
    files = [str(release / "mixed.jsonl"), str(release / "taxonomy.json")]
    code, out = _run(capsys, "--store", str(store), "-q", "import-astra", *files)
    assert code == 1 and "imported 0 environments" in out and "rejected 4" in out
    assert sorted(p.name for p in release.iterdir()) == before  # a release may be read-only or shared
    rejects = tmp_path / "runs" / "store.rejects.jsonl"
    assert f"rejected records with their reasons: {rejects}" in out
    assert [json.loads(line)["issues"][0]["rule"] for line in rejects.read_text().splitlines()] == ["import_format"] * 4
    for mode in SYNTHESIS_INPUTS:
        assert f"synthesis_input ({mode})" in out  # the formats table says what the files hold
    assert f"rejected {release / 'mixed.jsonl'}:1: [import_format] an input of ASTRA's" in out  # no empty field


def test_a_conversation_is_pointed_at_the_sft_importer():
    row = json.loads(
        (Path(__file__).parents[1] / "data_synth" / "data" / "astra_sft.jsonl").read_text().splitlines()[0]
    )
    c = convert(row, "f")
    assert c.format == "sft_conversation" and c.spec is None
    assert "data_synth traj import-astra FILE --output-file sft.parquet" in c.issues[0].message
