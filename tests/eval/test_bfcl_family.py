"""BFCL entries as env_registry environments and verl rows."""

from __future__ import annotations

import json

import jsonschema
import pytest

from env_registry.families import bfcl
from env_registry.families.bfcl_tools import FLOAT_NOTE, parameters_schema
from env_registry.rows import AGENT_NAME, RowInfo
from env_registry.structure import Rule, check_structure


def test_all_four_categories_load_with_their_ground_truth():
    entries = bfcl.load_entries()
    counts = {c: sum(e.category == c for e in entries) for c in bfcl.CATEGORIES}
    assert counts == {"base": 200, "miss_func": 200, "miss_param": 200, "long_context": 200}
    assert all(len(e.ground_truth) == len(e.turns) for e in entries)
    miss = [e for e in entries if e.category == "miss_func"]
    assert all(e.held_back for e in miss) and not any(e.held_back for e in entries if e.category != "miss_func")
    for e in miss:  # BFCL's loader took the held-back docs out of the shown functions
        shown = {d["name"] for d in e.functions}
        assert all(d["name"] not in shown for docs in e.held_back.values() for d in docs)
        assert all(e.turns[t] == [] for t in e.held_back)


def test_unknown_category_and_missing_ids_are_errors():
    with pytest.raises(ValueError, match="unknown BFCL multi-turn categories"):
        bfcl.load_entries(["composite"])
    with pytest.raises(bfcl.BfclDataError, match="multi_turn_base_999"):
        bfcl.load_entries(["base"], ids=["multi_turn_base_999"])


def test_bfcl_types_become_json_schema():
    doc = {
        "name": "f",
        "parameters": {
            "type": "dict",
            "properties": {
                "x": {"type": "float", "description": "A value."},
                "xs": {"type": "array", "items": {"type": "float"}, "description": "Values."},
                "d": {"type": "dict", "description": "Fields.", "properties": {"n": {"type": "integer"}}},
                "t": {"type": "tuple", "description": ""},
                "odd": {"type": "weird", "description": ""},
            },
            "required": ["x"],
        },
    }
    schema = parameters_schema(doc)
    jsonschema.Draft202012Validator.check_schema(schema)
    props = schema["properties"]
    assert schema["type"] == "object" and schema["required"] == ["x"]
    assert props["x"] == {"type": "number", "format": "float", "description": "A value." + FLOAT_NOTE}
    assert props["xs"]["items"] == {"type": "number"}
    assert props["d"]["type"] == "object" and props["d"]["properties"]["n"]["type"] == "integer"
    assert props["t"]["type"] == "array" and props["odd"]["type"] == "string"
    assert doc["parameters"]["type"] == "dict"  # the doc itself is untouched


def test_specs_hold_every_function_and_pass_all_but_the_qa_rules(bfcl_sample):
    from env_registry.store import EnvStore

    store = EnvStore.open(bfcl_sample.store)
    for entry, row in zip(bfcl_sample.data.entries, bfcl_sample.data.rows, strict=True):
        spec = store.get(RowInfo.from_extra_info(row["extra_info"]).env_id)
        assert [t.name for t in spec.tools] == [d["name"] for d in entry.all_functions()]
        assert spec.provenance.source == f"bfcl-eval=={bfcl.bfcl_version()}:{entry.id}"
        assert spec.question == entry.turns[0][0]["content"] and spec.sub_questions == [] and spec.final_answer == ""
        rules = {i.rule for i in check_structure(spec)}
        assert rules == {Rule.NON_EMPTY, Rule.HAS_TOOL_NODE}, rules  # no final answer, no trace: BFCL's checker judges
        assert entry.id in spec.tools[0].source and "bfcl_eval.eval_checker" in spec.tools[0].source
    ids = [RowInfo.from_extra_info(r["extra_info"]).env_id for r in bfcl_sample.data.rows]
    assert len(set(ids)) == len(ids)  # base_0 and long_context_0 share their question, not their identity


def test_rows_show_all_but_held_back_tools_and_carry_the_hook_and_the_checker_input(bfcl_sample):
    data = bfcl_sample.data
    for entry, row, target in zip(data.entries, data.rows, data.targets, strict=True):
        assert row["agent_name"] == AGENT_NAME
        assert row["data_source"] == f"astra/bfcl_multi_turn_{entry.category}"
        assert row["prompt"] == [{"role": "user", "content": entry.turns[0][0]["content"]}]  # no system prompt, as BFCL
        info = RowInfo.from_extra_info(row["extra_info"])
        assert [t.name for t in info.tools] == [d["name"] for d in entry.functions]
        kwargs = row["extra_info"]["interaction_kwargs"]
        assert kwargs["name"] == "bfcl_multi_turn" and kwargs["env_id"] == info.env_id
        turns = json.loads(kwargs["turns"])
        assert len(turns) == len(entry.turns) - 1
        assert target.ground_truth == entry.ground_truth and target.env_id == info.env_id
        assert target.checker_entry()["initial_config"] == entry.initial_config
    row = data.rows[bfcl_sample.index["multi_turn_miss_func_0"]]
    turns = json.loads(row["extra_info"]["interaction_kwargs"]["turns"])
    assert turns[2] == {"content": None, "add_tools": ["sort"]}  # turn 3 of the entry: BFCL's hold-out turn
    assert "sort" not in {t.name for t in RowInfo.from_extra_info(row["extra_info"]).tools}


def test_build_writes_store_rows_per_category_and_a_manifest(tmp_path):
    import pyarrow.parquet as pq

    out = bfcl.build(tmp_path / "bfcl", ["miss_func"], ids=["multi_turn_miss_func_0", "multi_turn_miss_func_2"])
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["rows"] == {"miss_func": 2} and manifest["bfcl_version"] == bfcl.bfcl_version()
    table = pq.read_table(out / "all.parquet").to_pylist()
    assert len(table) == 2 and pq.read_table(out / "miss_func.parquet").num_rows == 2
    assert table[0]["extra_info"]["interaction_kwargs"]["name"] == "bfcl_multi_turn"
    again = bfcl.build(tmp_path / "bfcl", ["miss_func"], ids=["multi_turn_miss_func_0", "multi_turn_miss_func_2"])
    from env_registry.store import EnvStore

    assert len(EnvStore.open(again / "store")) == 2  # rebuilding adds nothing (content-addressed)
