"""Ingest: ASTRA records, OpenAI tools lists, MCP tools/list results, BFCL func docs."""

from __future__ import annotations

import json

import pytest
from testkit import bfcl_func_doc_dir

from data_synth.traj.ingest import IngestConfig, build_server, detect_format, ingest, read_sources
from data_synth.traj.schema import SchemaRejected, normalize_parameters


def _tool(name, props=None, required=None, **extra):
    return {
        "name": name,
        "description": f"does {name}",
        "parameters": {"type": "object", "properties": props or {"q": {"type": "string"}}, "required": required or []},
        **extra,
    }


def _astra(name, tools, **group):
    return {
        "base_info": {
            "group_info": {
                "server_title": name.title(),
                "server_name": name,
                "server_description": "d",
                "domain": "x",
                **group,
            },
            "tool_list": tools,
        },
        "call_info": {"mock_tool": True},
    }


def test_astra_records_keep_valid_servers_and_name_every_rejection(tmp_path):
    good = _astra("weather", [_tool("now"), _tool("forecast"), _tool("alerts")])
    few = _astra("tiny", [_tool("a"), _tool("b")])
    broken = _astra(
        "mixed",
        [
            _tool("ok1"),
            _tool("ok2"),
            _tool("ok3"),
            {"name": "bad type", "parameters": {"type": "object"}},  # invalid name
            _tool("req", required=["missing"]),  # required names an undeclared property
            {"name": "arr", "parameters": {"type": "array"}},  # not an object schema
            _tool("ok1"),  # duplicate
        ],
    )
    no_group = {"base_info": {"tool_list": []}}
    path = tmp_path / "servers.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [good, few, broken, no_group]) + "\n")
    servers, rejected = ingest([path])
    assert [s.server_id for s in servers] == ["weather", "mixed"]
    assert servers[0].key == "weather" and servers[0].call_info == {"mock_tool": True}
    assert servers[0].domain == "x" and servers[0].title == "Weather"
    assert servers[1].tool_names() == ["ok1", "ok2", "ok3"]
    dropped = {d.tool: d.reason for d in servers[1].dropped_tools}
    assert "not a valid function name" in dropped["bad type"]
    assert "not declared in properties" in dropped["req"]
    assert "must be 'object'" in dropped["arr"]
    assert "duplicate tool name" in dropped["ok1"]
    reasons = {src.key: (r.reason, r.detail) for src, r in rejected}
    assert reasons[f"{path}#1"][0] == "too_few_tools" and "fewer than min_tools=3" in reasons[f"{path}#1"][1]
    assert reasons[f"{path}#3"][0] == "missing_group_info"


def test_strict_mode_rejects_a_server_with_any_invalid_tool(tmp_path):
    rec = _astra("s", [_tool("a"), _tool("b"), _tool("c"), {"name": "d", "parameters": {"type": "string"}}])
    (tmp_path / "s.json").write_text(json.dumps([rec]))
    servers, rejected = ingest([tmp_path / "s.json"], cfg=IngestConfig(drop_invalid_tools=False))
    assert not servers
    assert rejected[0][1].reason == "invalid_tools" and "d: parameters.type" in rejected[0][1].detail


def test_openai_and_mcp_formats(tmp_path):
    openai = [{"type": "function", "function": _tool(n)} for n in ("a", "b", "c")]
    (tmp_path / "shop.json").write_text(json.dumps(openai))
    mcp = {
        "result": {
            "tools": [
                {"name": "x", "description": "X", "inputSchema": {"type": "object", "properties": {}}},
                {"name": "y", "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}}},
                {
                    "name": "z",
                    "inputSchema": {"type": "object"},
                    "outputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
                },
            ]
        },
        "serverInfo": {"name": "notes-server"},
    }
    (tmp_path / "notes.json").write_text(json.dumps(mcp))
    servers, rejected = ingest([tmp_path])
    assert not rejected
    by_id = {s.server_id: s for s in servers}
    assert set(by_id) == {"shop", "notes-server"}
    assert by_id["shop"].source.format == "openai"
    assert by_id["notes-server"].source.format == "mcp"
    assert by_id["notes-server"].tool("z").output["properties"]["id"]["type"] == "string"
    assert by_id["notes-server"].tool("x").parameters == {"type": "object", "properties": {}}


def test_unreadable_files_are_rejections_not_crashes(tmp_path):
    (tmp_path / "junk.json").write_text('{"tools": [1, 2')  # truncated
    (tmp_path / "prose.jsonl").write_text("hello\n")
    servers, rejected = ingest([tmp_path])
    assert not servers
    assert {src.file.rsplit("/", 1)[-1] for src, _ in rejected} == {"junk.json", "prose.jsonl"}
    assert all(r.reason == "unreadable_file" and "JSON" in r.detail for _, r in rejected)


def test_duplicate_server_ids_are_rejected_with_the_first_location(tmp_path):
    rec = _astra("dup", [_tool("a"), _tool("b"), _tool("c")])
    (tmp_path / "a.json").write_text(json.dumps([rec]))
    (tmp_path / "b.json").write_text(json.dumps([rec]))
    sources = read_sources([tmp_path])
    assert sources[1].duplicate_of == f"{tmp_path / 'a.json'}#0"
    servers, rejected = ingest([tmp_path])
    assert len(servers) == 1
    assert rejected[0][1].reason == "duplicate_server_id" and "a.json" in rejected[0][1].detail


@pytest.mark.parametrize(
    ("schema", "expected_type"),
    [
        ({"type": "dict", "properties": {"x": {"type": "float"}}}, "number"),
        ({"type": "object", "properties": {"x": {"type": "any"}}}, None),
    ],
)
def test_python_type_names_are_mapped(schema, expected_type):
    out = normalize_parameters(schema)
    assert out["type"] == "object"
    assert out["properties"]["x"].get("type") == expected_type


def test_unknown_types_and_bad_schemas_are_rejected():
    with pytest.raises(SchemaRejected, match="unknown type 'widget'"):
        normalize_parameters({"type": "object", "properties": {"x": {"type": "widget"}}})
    with pytest.raises(SchemaRejected, match="not valid JSON Schema"):
        normalize_parameters({"type": "object", "properties": {"x": {"type": "string", "minLength": "3"}}})


def test_ingest_keeps_no_helper_only_tests_use():
    """bfcl_func_doc_dir found BFCL's docs for the tests alone (#46 §3): it is tests/testkit's now."""
    from data_synth.traj import ingest as module

    assert not hasattr(module, "bfcl_func_doc_dir")


def test_bfcl_func_docs_ingest_in_place():
    path = bfcl_func_doc_dir()
    assert detect_format(*_jsonl(path / "gorilla_file_system.json")) == "bfcl"
    servers, rejected = ingest([path])
    ids = {s.server_id for s in servers}
    assert {"gorilla-file-system", "message-api", "trading-bot", "travel-booking", "vehicle-control"} <= ids
    fs = next(s for s in servers if s.server_id == "gorilla-file-system")
    assert fs.title == "Gorilla file system"
    assert fs.tool("cat").description.startswith("Display the contents")  # the shared prefix moved to the server
    assert "Gorilla file system" in fs.description
    assert fs.tool("cd").parameters["type"] == "object"  # BFCL's "dict"
    assert fs.tool("find").output["properties"]["matches"]["type"] == "array"
    # web_search documents only 2 tools: below the paper's threshold, rejected with that reason.
    assert [(src.server_name, r.reason) for src, r in rejected] == [("web_search", "too_few_tools")]
    (one,) = read_sources([path / "math_api.json"], server_name="maths")
    assert build_server(one).server_id == "maths"


def _jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()], True
