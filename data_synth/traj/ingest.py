"""Ingest tool documentation into `Server` records (step 1 of ASTRA §1).

Accepted inputs (the format is detected per file, or forced with `fmt=`):

- `astra`: ASTRA's per-server records, a JSON list or JSONL of
  `{"base_info": {"group_info": {server_title, server_name, server_description, domain},
  "tool_list": [{name, description, parameters}]}, "call_info": {...}}`.
- `openai`: a plain OpenAI `tools` list (`[{"type": "function", "function": {...}}]`, or bare
  function objects), JSON or JSONL; one server per file, named after the file unless given.
- `mcp`: an MCP `tools/list` result `{"tools": [{name, description, inputSchema, outputSchema?}]}`
  (also inside a JSON-RPC envelope `{"result": {...}}`); optional `serverInfo {name, title}`.
- `bfcl`: BFCL's multi-turn function docs (JSONL, one function a line, `response` documents the
  output; descriptions read "This tool belongs to X. ... Tool description: Y"): one server per
  file; the shared prefix becomes the server description.

Every tool is normalized (`schema.normalize_parameters`); a tool that cannot be is rejected with
file, record, tool and reason. A server is kept when it has at least `min_tools` valid tools (the
paper keeps >= 3); with `drop_invalid_tools=False` one invalid tool rejects its whole server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from data_synth.traj.records import Server, Source, ToolDoc
from data_synth.traj.schema import SchemaRejected, check_tool_name, normalize_output, normalize_parameters

FORMATS = ("astra", "openai", "mcp", "bfcl")


class IngestIssue(BaseModel):
    """A rejected server or tool (`tool` set), or a dropped output schema (`level="warning"`)."""

    model_config = ConfigDict(extra="forbid")

    file: str
    record: int | None
    server: str | None = None
    tool: str | None = None
    level: str = "error"
    reason: str


@dataclass
class IngestConfig:
    min_tools: int = 3
    drop_invalid_tools: bool = True


@dataclass
class IngestResult:
    servers: list[Server] = field(default_factory=list)
    issues: list[IngestIssue] = field(default_factory=list)

    @property
    def rejected(self) -> list[IngestIssue]:
        return [i for i in self.issues if i.level == "error"]


def slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.strip().lower()).strip("-")
    return s or "server"


# -- reading files ------------------------------------------------------------------------
def _read_json_or_jsonl(path: Path) -> tuple[Any, bool]:
    """(content, is_jsonl). A JSONL file gives the list of its non-empty lines' values; a line
    that does not parse raises with its line number."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text), False
    except json.JSONDecodeError:
        pass
    rows = []
    for i, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{path}: line {i + 1} is not JSON ({e.msg}); the file is neither JSON nor JSONL"
            ) from None
    return rows, True


def detect_format(content: Any, is_jsonl: bool) -> str:
    if isinstance(content, dict):
        inner = content.get("result", content) if isinstance(content.get("result"), dict) else content
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


# -- tools --------------------------------------------------------------------------------
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
    params = raw.get(params_key, raw.get("parameters"))
    parameters = normalize_parameters(params)
    output, warning = None, None
    if output_key and raw.get(output_key) is not None:
        try:
            output = normalize_output(raw[output_key])
        except SchemaRejected as e:
            warning = f"output schema dropped: {e}"
    return ToolDoc(name=name, description=description.strip(), parameters=parameters, output=output), warning


def _build_server(
    *,
    name: str,
    title: str,
    description: str,
    domain: str,
    raw_tools: Any,
    params_key: str,
    output_key: str | None,
    call_info: Any,
    source: Source,
    cfg: IngestConfig,
    result: IngestResult,
    tool_fix=None,
) -> None:
    where = {"file": source.file, "record": source.record, "server": name}
    if not isinstance(raw_tools, list):
        result.issues.append(IngestIssue(**where, reason="tool list missing or not a list"))
        return
    tools: list[ToolDoc] = []
    bad: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_tools):
        tool_name = raw.get("name") if isinstance(raw, dict) else None
        if isinstance(raw, dict) and isinstance(raw.get("function"), dict):
            tool_name = raw["function"].get("name")
        try:
            tool, warning = _tool(raw, params_key, output_key)
            if tool.name in seen:
                raise SchemaRejected(f"duplicate tool name {tool.name!r} in this server")
        except SchemaRejected as e:
            label = tool_name if isinstance(tool_name, str) else f"#{i}"
            result.issues.append(IngestIssue(**where, tool=label, reason=str(e)))
            bad.append(label)
            continue
        if tool_fix is not None:
            tool = tool_fix(tool)
        if warning:
            result.issues.append(IngestIssue(**where, tool=tool.name, level="warning", reason=warning))
        seen.add(tool.name)
        tools.append(tool)
    if bad and not cfg.drop_invalid_tools:
        result.issues.append(IngestIssue(**where, reason=f"invalid tools {bad} (drop_invalid_tools is off)"))
        return
    if len(tools) < cfg.min_tools:
        result.issues.append(
            IngestIssue(**where, reason=f"{len(tools)} valid tools, fewer than min_tools={cfg.min_tools}")
        )
        return
    if call_info is not None and not isinstance(call_info, dict):
        result.issues.append(IngestIssue(**where, reason="call_info must be an object"))
        return
    result.servers.append(
        Server(
            server_id=slug(name),
            title=title or name,
            name=name,
            description=description,
            domain=domain,
            tools=tools,
            call_info=call_info,
            source=source,
        )
    )


def _astra_records(content: Any, path: Path, cfg: IngestConfig, result: IngestResult) -> None:
    rows = content if isinstance(content, list) else [content]
    for i, rec in enumerate(rows):
        src = Source(file=str(path), record=i, format="astra")
        base = rec.get("base_info") if isinstance(rec, dict) else None
        group = base.get("group_info") if isinstance(base, dict) else None
        if not isinstance(group, dict):
            result.issues.append(IngestIssue(file=str(path), record=i, reason="missing base_info.group_info"))
            continue
        name = group.get("server_name") or group.get("server_title")
        if not isinstance(name, str) or not name.strip():
            result.issues.append(IngestIssue(file=str(path), record=i, reason="group_info has no server_name"))
            continue
        _build_server(
            name=name,
            title=str(group.get("server_title") or name),
            description=str(group.get("server_description") or ""),
            domain=str(group.get("domain") or ""),
            raw_tools=base.get("tool_list"),
            params_key="parameters",
            output_key=None,
            call_info=rec.get("call_info"),
            source=src,
            cfg=cfg,
            result=result,
        )


_BFCL_SPLIT = "Tool description:"


def _bfcl_server_text(rows: list[dict]) -> tuple[str, str]:
    """(server description, title) from BFCL's shared description prefix."""
    prefixes = [
        r.get("description", "").split(_BFCL_SPLIT)[0].strip() for r in rows if _BFCL_SPLIT in r.get("description", "")
    ]
    prefix = max(set(prefixes), key=prefixes.count) if prefixes else ""
    m = re.match(r"This tool belongs to (?:the )?(.+?)(?:\.|,| which)", prefix)
    return prefix, (m.group(1).strip() if m else "")


def _bfcl_tool(tool: ToolDoc) -> ToolDoc:
    if _BFCL_SPLIT in tool.description:
        tool = tool.model_copy(update={"description": tool.description.split(_BFCL_SPLIT, 1)[1].strip()})
    return tool


def ingest_file(
    path: str | Path,
    *,
    fmt: str | None = None,
    server_name: str | None = None,
    domain: str = "",
    cfg: IngestConfig | None = None,
    result: IngestResult | None = None,
) -> IngestResult:
    """Read one file into `result` (a fresh one if not given). A file that cannot be read at all is
    one issue, not an exception."""
    cfg = cfg or IngestConfig()
    result = result if result is not None else IngestResult()
    path = Path(path)
    try:
        content, is_jsonl = _read_json_or_jsonl(path)
        fmt = fmt or detect_format(content, is_jsonl)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        result.issues.append(IngestIssue(file=str(path), record=None, reason=str(e)))
        return result
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {FORMATS}")
    if fmt == "astra":
        _astra_records(content, path, cfg, result)
        return result
    name = server_name or path.stem
    src = Source(file=str(path), record=0, format=fmt)
    if fmt == "mcp":
        inner = content.get("result", content) if isinstance(content, dict) else {}
        info = inner.get("serverInfo") or content.get("serverInfo") or {}
        _build_server(
            name=server_name or info.get("name") or path.stem,
            title=info.get("title") or info.get("name") or name,
            description=str(inner.get("instructions") or info.get("description") or ""),
            domain=domain,
            raw_tools=inner.get("tools"),
            params_key="inputSchema",
            output_key="outputSchema",
            call_info=None,
            source=src,
            cfg=cfg,
            result=result,
        )
    elif fmt == "openai":
        tools = content.get("tools") if isinstance(content, dict) else content
        _build_server(
            name=name,
            title=name,
            description="",
            domain=domain,
            raw_tools=tools,
            params_key="parameters",
            output_key=None,
            call_info=None,
            source=src,
            cfg=cfg,
            result=result,
        )
    else:  # bfcl
        rows = content if isinstance(content, list) else [content]
        description, title = _bfcl_server_text([r for r in rows if isinstance(r, dict)])
        _build_server(
            name=name,
            title=title or name,
            description=description,
            domain=domain or "bfcl",
            raw_tools=rows,
            params_key="parameters",
            output_key="response",
            call_info=None,
            source=src,
            cfg=cfg,
            result=result,
            tool_fix=_bfcl_tool,
        )
    return result


def _expand(paths: Iterable[str | Path]) -> Iterator[Path]:
    for p in paths:
        p = Path(p)
        if p.is_dir():
            yield from sorted(q for q in p.rglob("*") if q.suffix in (".json", ".jsonl") and q.is_file())
        else:
            yield p


def ingest(
    paths: Iterable[str | Path], *, fmt: str | None = None, domain: str = "", cfg: IngestConfig | None = None
) -> IngestResult:
    """Ingest files and folders (recursively: *.json, *.jsonl). Server ids must be unique; a later
    server whose id is taken is rejected, naming where the first came from."""
    result = IngestResult()
    for path in _expand(paths):
        ingest_file(path, fmt=fmt, domain=domain, cfg=cfg, result=result)
    unique: dict[str, Server] = {}
    for server in result.servers:
        first = unique.get(server.server_id)
        if first is not None:
            result.issues.append(
                IngestIssue(
                    file=server.source.file,
                    record=server.source.record,
                    server=server.name,
                    reason=f"duplicate server id {server.server_id!r} (first from {first.source.file}#{first.source.record})",
                )
            )
            continue
        unique[server.server_id] = server
    result.servers = list(unique.values())
    return result


def bfcl_func_doc_dir() -> Path:
    """Where the installed `bfcl-eval` package keeps its multi-turn function docs (used in place)."""
    from importlib.resources import files

    path = Path(str(files("bfcl_eval") / "data" / "multi_turn_func_doc"))
    if not path.is_dir():
        raise FileNotFoundError(f"bfcl-eval is installed but has no {path}")
    return path
