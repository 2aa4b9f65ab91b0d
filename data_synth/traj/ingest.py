"""Ingest tool documentation into `Server` records (docs/method.md §1).

Accepted inputs (the format is detected per file, or forced with `fmt=`):

- `astra`: ASTRA's per-server records, a JSON list or JSONL of
  `{"base_info": {"group_info": {server_title, server_name, server_description, domain},
  "tool_list": [{name, description, parameters}]}, "call_info": {...}}`.
- `openai`: a plain OpenAI `tools` list (`[{"type": "function", "function": {...}}]`, or bare
  function objects), JSON or JSONL; one server per file, named after the file unless given.
- `mcp`: an MCP `tools/list` result `{"tools": [{name, description, inputSchema, outputSchema?}]}`
  (also inside a JSON-RPC envelope `{"result": {...}}`); optional `serverInfo {name, title}` and
  `call_info` (our addition, as in ASTRA's records: how `interact --backend mcp` reaches it).
- `bfcl`: BFCL's multi-turn function docs (JSONL, one function a line, `response` documents the
  output; descriptions read "This tool belongs to X. ... Tool description: Y"): one server per
  file; the shared prefix becomes the server description.

Two phases: `read_sources` splits files into one `SourceRecord` per server (unreadable files and
duplicate server ids are marked there, since only that phase sees every file), and
`build_server` validates one record into a `Server` or raises `Reject` with the reason. Every
tool is normalized (`schema.normalize_parameters`); a tool that cannot be is dropped and listed
in `Server.dropped_tools` with its reason. A server is kept when it has at least `min_tools`
valid tools (the paper keeps >= 3); with `drop_invalid_tools=False` one invalid tool rejects
its whole server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from astra_foundation.strict import StrictModel
from data_synth.pipeline import Reject
from data_synth.traj.records import DroppedTool, Server, Source, SourceRecord, ToolDoc
from data_synth.traj.schema import SchemaRejected, check_tool_name, normalize_output, normalize_parameters

FORMATS = ("astra", "openai", "mcp", "bfcl")
_BFCL_SPLIT = "Tool description:"


class IngestConfig(StrictModel):
    section = "ingest"

    min_tools: int = 3
    drop_invalid_tools: bool = True


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.strip().lower()).strip("-")
    return s or "server"


# -- phase 1: files -> source records ------------------------------------------------------
def _read_json_or_jsonl(path: Path) -> tuple[Any, bool, dict[int, str]]:
    """(content, is_jsonl, bad lines). A JSONL file gives the list of its non-empty lines' values,
    None where a line does not parse; `bad` maps such a line's position in that list to
    `line N: what is wrong` (the other lines are still read: a corrupt line is rejected alone)."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text), False, {}
    except json.JSONDecodeError:
        pass
    rows: list[Any] = []
    bad: dict[int, str] = {}
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            bad[len(rows)] = f"line {i + 1} is not JSON ({e.msg})"
            rows.append(None)
    if len(bad) == len(rows):
        first = next(iter(bad.values()), "the file is empty")
        raise ValueError(f"neither JSON nor JSONL: {first}")
    return rows, True, bad


def detect_format(content: Any, is_jsonl: bool) -> str:
    if isinstance(content, dict):
        inner = content["result"] if isinstance(content.get("result"), dict) else content
        if isinstance(inner.get("tools"), list):
            tools = inner["tools"]
            if any(isinstance(t, dict) and ("inputSchema" in t or "function" not in t) for t in tools):
                return "mcp"
            return "openai"
        if "base_info" in content:
            return "astra"
        raise ValueError("a JSON object that is neither an MCP tools/list result nor an ASTRA record")
    if isinstance(content, list) and content:
        first = content[0]
        if isinstance(first, dict) and "base_info" in first:
            return "astra"
        if isinstance(first, dict) and ("function" in first or "parameters" in first or "name" in first):
            bare = all(isinstance(r, dict) and "name" in r and "function" not in r for r in content)
            if is_jsonl and bare and any("response" in r or _BFCL_SPLIT in str(r.get("description")) for r in content):
                return "bfcl"
            return "openai"
    raise ValueError("cannot tell the format (expected astra, openai, mcp or bfcl); pass it explicitly")


def _astra_name(rec: Any) -> str | None:
    group = rec.get("base_info", {}).get("group_info") if isinstance(rec, dict) else None
    if not isinstance(group, dict):
        return None
    name = group.get("server_name") or group.get("server_title")
    return name if isinstance(name, str) and name.strip() else None


def _mcp_info(content: Any) -> dict[str, Any]:
    inner = content.get("result", content) if isinstance(content, dict) else {}
    return (inner.get("serverInfo") if isinstance(inner, dict) else None) or content.get("serverInfo") or {}


def _file_sources(path: Path, fmt: str | None, server_name: str | None, domain: str) -> list[SourceRecord]:
    base = {"file": str(path), "domain": domain}
    try:
        content, is_jsonl, bad = _read_json_or_jsonl(path)
        good = [r for i, r in enumerate(content) if i not in bad] if bad else content
        fmt = fmt or detect_format(good, is_jsonl)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        return [SourceRecord(key=f"{path}#0", index=0, error=str(e), **base)]
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {FORMATS}")
    if fmt == "astra":  # one server per record: a corrupt line is a rejected record of its own
        rows = content if isinstance(content, list) else [content]
        return [
            SourceRecord(key=f"{path}#{i}", index=i, error=bad[i], **base)
            if i in bad
            else SourceRecord(key=f"{path}#{i}", index=i, format=fmt, server_name=_astra_name(r), content=r, **base)
            for i, r in enumerate(rows)
        ]
    # one server per file: its tools come from the lines that parse; each corrupt line is rejected
    name = server_name or (_mcp_info(good).get("name") if fmt == "mcp" else None) or path.stem
    corrupt = [SourceRecord(key=f"{path}#line-{i}", index=i, error=why, **base) for i, why in bad.items()]
    return [SourceRecord(key=f"{path}#0", index=0, format=fmt, server_name=name, content=good, **base), *corrupt]


def expand_paths(paths: Iterable[str | Path]) -> Iterator[Path]:
    """The files `paths` name: files as given, folders searched for *.json and *.jsonl."""
    for p in paths:
        p = Path(p)
        if p.is_dir():
            yield from sorted(q for q in p.rglob("*") if q.suffix in (".json", ".jsonl") and q.is_file())
        else:
            yield p


def read_sources(
    paths: Iterable[str | Path], *, fmt: str | None = None, server_name: str | None = None, domain: str = ""
) -> list[SourceRecord]:
    """One record per server found in the files and folders (recursively: *.json, *.jsonl), in
    order. A later record whose server id an earlier one took gets `duplicate_of`."""
    out: list[SourceRecord] = []
    first: dict[str, str] = {}
    for path in expand_paths(paths):
        for src in _file_sources(path, fmt, server_name, domain):
            if src.server_name:
                sid = slug(src.server_name)
                if sid in first:
                    src.duplicate_of = first[sid]
                else:
                    first[sid] = src.key
            out.append(src)
    return out


# -- phase 2: source record -> server -------------------------------------------------------
def _tool(raw: Any, params_key: str, output_key: str | None) -> tuple[ToolDoc, str | None]:
    """A normalized tool and a warning about a dropped output schema (or None); raises
    `SchemaRejected` for a tool that cannot be used."""
    if not isinstance(raw, dict):
        raise SchemaRejected(f"a tool must be an object, got {type(raw).__name__}")
    if raw.get("type") == "function" and isinstance(raw.get("function"), dict):
        raw = raw["function"]
    name = check_tool_name(raw.get("name"))
    description = raw.get("description") or ""
    if not isinstance(description, str):
        raise SchemaRejected("description: must be a string")
    parameters = normalize_parameters(raw.get(params_key, raw.get("parameters")))
    output, warning = None, None
    if output_key and raw.get(output_key) is not None:
        try:
            output = normalize_output(raw[output_key])
        except SchemaRejected as e:
            warning = f"{name}: output schema dropped: {e}"
    return ToolDoc(name=name, description=description.strip(), parameters=parameters, output=output), warning


def _tool_label(raw: Any, i: int) -> str:
    if isinstance(raw, dict):
        fn = raw.get("function") if isinstance(raw.get("function"), dict) else raw
        if isinstance(fn.get("name"), str):
            return fn["name"]
    return f"#{i}"


def _bfcl_server_text(rows: list[Any]) -> tuple[str, str]:
    """(server description, title) from BFCL's shared description prefix."""
    prefixes = [
        r["description"].split(_BFCL_SPLIT)[0].strip()
        for r in rows
        if isinstance(r, dict) and isinstance(r.get("description"), str) and _BFCL_SPLIT in r["description"]
    ]
    prefix = max(set(prefixes), key=prefixes.count) if prefixes else ""
    m = re.match(r"This tool belongs to (?:the )?(.+?)(?:\.|,| which)", prefix)
    return prefix, (m.group(1).strip() if m else "")


def _server_fields(src: SourceRecord) -> dict[str, Any]:
    """name, title, description, domain, raw tools, params/output keys, call_info per format."""
    c = src.content
    if src.format == "astra":
        base = c.get("base_info") if isinstance(c, dict) else None
        group = base.get("group_info") if isinstance(base, dict) else None
        if not isinstance(group, dict):
            raise Reject("missing_group_info", "the record has no base_info.group_info object")
        if not src.server_name:
            raise Reject("missing_server_name", "group_info has no server_name or server_title")
        return {
            "title": str(group.get("server_title") or src.server_name),
            "description": str(group.get("server_description") or ""),
            "domain": str(group.get("domain") or src.domain),
            "tools": base.get("tool_list"),
            "params_key": "parameters",
            "output_key": None,
            "call_info": c.get("call_info"),
        }
    if src.format == "mcp":
        inner = c["result"] if isinstance(c.get("result"), dict) else c
        info = _mcp_info(c)
        return {
            "title": str(info.get("title") or src.server_name),
            "description": str(inner.get("instructions") or info.get("description") or ""),
            "domain": src.domain,
            "tools": inner.get("tools"),
            "params_key": "inputSchema",
            "output_key": "outputSchema",
            "call_info": c.get("call_info"),
        }
    if src.format == "openai":
        return {
            "title": src.server_name,
            "description": "",
            "domain": src.domain,
            "tools": c.get("tools") if isinstance(c, dict) else c,
            "params_key": "parameters",
            "output_key": None,
            "call_info": None,
        }
    rows = c if isinstance(c, list) else [c]  # bfcl
    description, title = _bfcl_server_text(rows)
    return {
        "title": title or src.server_name,
        "description": description,
        "domain": src.domain or "bfcl",
        "tools": rows,
        "params_key": "parameters",
        "output_key": "response",
        "call_info": None,
    }


def build_server(src: SourceRecord, cfg: IngestConfig | None = None) -> Server:
    """The validated server of one source record, or `Reject` with the reason."""
    cfg = cfg or IngestConfig()
    if src.error:
        raise Reject("unreadable_file", src.error)
    if src.duplicate_of:
        raise Reject(
            "duplicate_server_id", f"server id {slug(src.server_name or '')!r} first came from {src.duplicate_of}"
        )
    f = _server_fields(src)
    if not isinstance(f["tools"], list):
        raise Reject("no_tool_list", "the tool list is missing or not a list")
    if f["call_info"] is not None and not isinstance(f["call_info"], dict):
        raise Reject("bad_call_info", "call_info must be an object")
    tools: list[ToolDoc] = []
    dropped: list[DroppedTool] = []
    warnings: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(f["tools"]):
        try:
            tool, warning = _tool(raw, f["params_key"], f["output_key"])
            if tool.name in seen:
                raise SchemaRejected(f"duplicate tool name {tool.name!r} in this server")
        except SchemaRejected as e:
            dropped.append(DroppedTool(tool=_tool_label(raw, i), reason=str(e)))
            continue
        if src.format == "bfcl" and _BFCL_SPLIT in tool.description:
            tool = tool.model_copy(update={"description": tool.description.split(_BFCL_SPLIT, 1)[1].strip()})
        if warning:
            warnings.append(warning)
        seen.add(tool.name)
        tools.append(tool)
    if dropped and not cfg.drop_invalid_tools:
        raise Reject("invalid_tools", "; ".join(f"{d.tool}: {d.reason}" for d in dropped))
    if len(tools) < cfg.min_tools:
        detail = f"{len(tools)} valid tools, fewer than min_tools={cfg.min_tools}"
        if dropped:
            detail += "; dropped: " + "; ".join(f"{d.tool}: {d.reason}" for d in dropped)
        raise Reject("too_few_tools", detail)
    return Server(
        key=slug(src.server_name),
        server_id=slug(src.server_name),
        title=f["title"],
        name=src.server_name,
        description=f["description"],
        domain=f["domain"],
        tools=tools,
        call_info=f["call_info"],
        source=Source(file=src.file, record=src.index, format=src.format),
        dropped_tools=dropped,
        warnings=warnings,
    )


def ingest(paths: Iterable[str | Path], **kwargs: Any) -> tuple[list[Server], list[tuple[SourceRecord, Reject]]]:
    """Both phases in memory (for tests and notebooks; the CLI runs phase 2 as a resumable step):
    (servers, [(source, rejection)])."""
    cfg = kwargs.pop("cfg", None)
    servers, rejected = [], []
    for src in read_sources(paths, **kwargs):
        try:
            servers.append(build_server(src, cfg))
        except Reject as e:
            rejected.append((src, e))
    return servers, rejected
