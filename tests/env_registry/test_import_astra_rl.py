"""ASTRA-RL-1k rows: golden-call recovery, the version-2 environments it imports, the plain rule,
and the export that gives the recovery its ground truth. Fixtures are ours, in the release's
format (tests/env_registry/data/astra_rl_recovery.jsonl): a chain read from a background, an enum
the task names, and the release's defect kinds (duplicate names, a random id, code off its
schema) plus an answer two named entities share."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from env_registry.cli import main
from env_registry.export_rl import answers_by_tool, to_rl_row
from env_registry.families.procedural import generate
from env_registry.family_rules import PLAIN_RL_GENERATOR
from env_registry.importers.astra import convert, read_rl_row
from env_registry.importers.astra_rl import RECOVERED_GENERATOR, recovered_conversion, row_tools
from env_registry.matching import args_agree
from env_registry.recovery import Budget, RowTools, recover_row, text_values
from env_registry.store import EnvStore
from env_registry.structure import Rule, check_structure
from env_registry.validate import default_sandbox, validate_envs

FIXTURES = Path(__file__).parent / "data" / "astra_rl_recovery.jsonl"


def _rows() -> list[dict]:
    return [json.loads(line) for line in FIXTURES.read_text().splitlines()]


def _recover(rows: list[RowTools], budget: Budget | None = None) -> list:
    async def go():
        async with default_sandbox() as sandbox:
            return [await recover_row(r, sandbox, budget or Budget()) for r in rows]

    return asyncio.run(go())


def test_text_values_name_whole_entities_first():
    values = text_values(
        'Which of Nelna Naszousberg and the Gami Pro 7 ships to RES98765? {"background": "via Harbour Point"}'
    )
    assert values.index("Nelna Naszousberg") < values.index("Nelna")
    assert {"Gami Pro 7", "RES98765", "via Harbour Point", "Harbour Point", 7} <= set(values)
    assert "Which" not in values  # a sentence's first word names nothing


def test_a_chain_is_recovered_in_dependency_order_and_says_how():
    row, issues = read_rl_row(_rows()[0])
    assert row is not None and not issues
    (rec,) = _recover([row_tools(row)])
    assert rec.complete
    lookup, fee = rec.recovered
    assert lookup.args == {"passenger": "Mira Okafor", "origin": "Harbour Point", "destination": "Eastvale"}
    assert set(lookup.found_by.values()) == {"text"}
    assert fee.args == {"booking_id": "BK40712", "bags": 3}
    assert fee.found_by == {"booking_id": "answer of booking_lookup#0", "bags": "text"}
    assert fee.depends_on == ["booking_lookup#0"]


def test_a_recovered_row_is_a_current_environment_that_validates():
    row, _ = read_rl_row(_rows()[1])
    (rec,) = _recover([row_tools(row)])
    spec = recovered_conversion(row, rec, "f.jsonl:2", "astra").spec
    assert spec is not None and spec.spec_version == 3 and spec.provenance.generator == RECOVERED_GENERATOR
    assert spec.answer_type is not None  # inferred from the root's answer (issue 48)
    assert not check_structure(spec)
    rain, subtract = spec.tools
    assert [g.args for g in rain.golden_calls] == [
        {"town": "Orlisk", "month": "march"},
        {"town": "Tamberg", "month": "march"},
    ]
    assert rain.call_key.params == ["town", "month"]  # the month asked is part of what a call asks
    q1, q2, q3 = spec.sub_questions
    assert (q3.tool, q3.answer, q3.depends_on) == ("subtract", "42", ["q1", "q2"])
    assert spec.final_answer == "42" and spec.scenario_type.value == "parallel_multi_hop"
    assert json.loads(spec.provenance.source.split("found_by=")[1])["q3"] == {
        "a": "answer of rainfall#0",
        "b": "answer of rainfall#1",
    }
    target = {q.id: q for q in spec.reward_target().sub_questions}
    assert args_agree({"town": "orlisk", "month": "march"}, target["q1"].call_check)
    assert not args_agree({"town": "Orlisk", "month": "april"}, target["q1"].call_check)
    assert validate_envs([spec], progress=False).ok  # replayed twice in fresh sessions


def test_a_wrong_entity_whose_output_holds_the_answer_is_never_accepted():
    row, _ = read_rl_row(_rows()[5])  # Ada Varga and Tomas Lind are both in Logistics
    (rec,) = _recover([row_tools(row)])
    assert not rec.recovered and rec.missing["employee#0"].startswith("ambiguous: 2 calls")
    conversion = recovered_conversion(row, rec, "f", "astra")
    assert conversion.spec is None and conversion.issues[0].rule is Rule.GOLDEN_PRESENT
    plain = recovered_conversion(row, rec, "f", "astra", plain=True).spec
    assert plain.provenance.generator == PLAIN_RL_GENERATOR and all(t.call_key is None for t in plain.tools)


def test_a_random_answer_is_not_reproducible_and_the_search_is_bounded():
    row, _ = read_rl_row(_rows()[3])
    (rec,) = _recover([row_tools(row)])
    assert rec.missing == {"pay_invoice#0": rec.missing["pay_invoice#0"]}
    assert rec.missing["pay_invoice#0"].startswith("not reproducible")
    row, _ = read_rl_row(_rows()[0])
    (rec,) = _recover([row_tools(row)], Budget(calls_per_tool=5))
    assert not rec.complete and rec.gave_up.startswith("search bounded: 5 calls per tool and round")


def _run(capsys, *argv):
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_import_astra_imports_the_recoverable_rows(tmp_path, capsys):
    store, rejects = str(tmp_path / "store"), tmp_path / "rejects.jsonl"
    code, out = _run(capsys, "--store", store, "-q", "import-astra", str(FIXTURES), "--rejects", str(rejects))
    assert code == 1, out
    assert "ASTRA-RL-1k golden-call recovery: 2 recovered, 2 unrecovered" in out
    assert "imported 2 environments, 0 already in the store, rejected 4" in out
    reasons = {json.loads(r)["line"]: json.loads(r)["issues"][0] for r in rejects.read_text().splitlines()}
    assert {line: issue["rule"] for line, issue in reasons.items()} == {
        3: "tool_names_unique",
        4: "golden_present",
        5: "tool_signature",
        6: "golden_present",
    }
    assert "not reproducible" in reasons[4]["message"] and "ambiguous" in reasons[6]["message"]
    imported = list(EnvStore.open(store))
    assert {e.provenance.generator for e in imported} == {RECOVERED_GENERATOR}
    assert validate_envs(imported, progress=False).ok

    store2 = str(tmp_path / "plain")
    argv = ["--store", store2, "-q", "import-astra", str(FIXTURES), "--rejects", str(tmp_path / "r2.jsonl")]
    code, out = _run(capsys, *argv, "--reward-rule", "plain")
    assert "ASTRA-RL-1k golden-call recovery: 2 plain rule, 2 recovered (plain-rule rows pay" in out
    assert "imported 4 environments, 0 already in the store, rejected 2" in out  # the two defective rows
    plain = [e for e in EnvStore.open(store2) if e.provenance.generator == PLAIN_RL_GENERATOR]
    assert len(plain) == 2 and validate_envs(plain, progress=False).ok  # waived: the missing calls only


def test_export_then_recover_gives_back_the_stripped_calls(tmp_path, capsys):
    envs = [e for e in generate(12, seed=5)]
    row = to_rl_row(envs[0])
    assert set(row) == {"prompt", "tool_schema", "tool_dict", "sub_qa_dict"}
    assert "golden" not in row["tool_schema"] and envs[0].sub_questions[0].question not in json.dumps(row)
    store = str(tmp_path / "store")
    assert main(["--store", store, "-q", "generate", "--n", "12", "--seed", "5"]) == 0
    rows_file = tmp_path / "rows.jsonl"
    code, out = _run(capsys, "--store", store, "export-astra-rl", "--output-file", str(rows_file))
    assert code == 0 and "wrote 12 ASTRA-RL-1k rows" in out
    code, out = _run(capsys, "-q", "recover-calls", str(rows_file), "--output-file", str(tmp_path / "rec.jsonl"))
    assert "12 sound ASTRA-RL-1k rows" in out
    by_question = {e.question: e for e in EnvStore.open(store)}
    agree = total = 0
    recovered = (tmp_path / "rec.jsonl").read_text().splitlines()
    for line, rec in zip(rows_file.read_text().splitlines(), recovered, strict=True):
        env = by_question[json.loads(json.loads(line)["prompt"])[-1]["content"]]
        target = {q.id: q for q in env.reward_target().sub_questions}
        ids = {f"{t}#{k}": qid for t, pairs in answers_by_tool(env).items() for k, (qid, _) in enumerate(pairs)}
        total += len(ids)
        for r in json.loads(rec)["recovered"]:
            assert args_agree(r["args"], target[ids[r["answer"]]].call_check), (env.question, r)
            agree += 1
    assert agree >= 0.8 * total  # bench/recovery.py measures the share on hundreds of worlds


@pytest.mark.parametrize("index", [2, 4])
def test_defective_rows_keep_their_defects(index):
    c = convert(_rows()[index], "f")
    assert c.rl_row is None and c.issues[0].rule in (Rule.TOOL_NAMES_UNIQUE, Rule.TOOL_SIGNATURE)


STATIONS = RowTools(
    text="When does the first train leave Harbour Point, and from which platform?",
    schemas={
        "first_train": {
            "type": "object",
            "properties": {"station_code": {"type": "string", "description": "Three-letter station code."}},
            "required": ["station_code"],
        }
    },
    sources={
        "first_train": "TIMES = {'HBP': '05:42 from platform 3', 'EVL': '05:42 from platform 1'}\n\n\n"
        "def first_train(station_code):\n"
        "    if station_code not in TIMES:\n"
        "        raise ValueError(f'unknown station code {station_code}')\n"
        "    return f'First train from {station_code}: {TIMES[station_code]}'\n"
    },
    targets={"first_train": ["05:42"]},
)


def _proposing(*calls: dict):
    """A canned model (the synthesis client's scripted backend) proposing `calls` for any answer."""
    from astra_foundation.llm.client import LLMClient
    from astra_foundation.llm.scripted import ScriptedBackend
    from env_registry.recovery_llm import STEP, llm_proposer

    def responder(step, payload):
        assert step == STEP and "05:42" in payload["messages"][-1]["content"]
        return json.dumps({"calls": list(calls)})

    return llm_proposer(LLMClient(ScriptedBackend([], responder=responder), model="scripted"))


def _recover_with(propose) -> object:
    async def go():
        async with default_sandbox() as sandbox:
            return await recover_row(STATIONS, sandbox, Budget(), propose)

    return asyncio.run(go())


def test_a_models_proposal_is_a_candidate_the_sandbox_accepts_or_not():
    rec = _recover_with(None)  # the text names the station, not its code: nothing LLM-free finds it
    assert rec.missing["first_train#0"] == "no candidate call's output contains it"
    rec = _recover_with(_proposing({"station_code": "HBP"}, {"station_code": "Harbour Point"}, {"code": 1}))
    (found,) = rec.recovered
    assert found.args == {"station_code": "HBP"} and found.found_by == {"station_code": "llm"}
    # a second proposal whose output holds the answer too makes it ambiguous: the model does not decide
    rec = _recover_with(_proposing({"station_code": "HBP"}, {"station_code": "EVL"}))
    assert not rec.recovered and rec.missing["first_train#0"].startswith("ambiguous: 2 calls")
    assert "(with 2 calls a model proposed)" in rec.missing["first_train#0"]
