"""Text renderings of servers and tools for prompts (pure)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from data_synth.traj.compat import output_slots
from data_synth.traj.records import Server, ToolDoc

_DESC_CHARS = 300


def _short(text: str, n: int = _DESC_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 3] + "..."


def tool_line(tool: ToolDoc, *, io: bool = True) -> str:
    """`- name: description` plus, with `io`, its inputs and documented outputs."""
    lines = [f"- {tool.name}: {_short(tool.description) or '(no description)'}"]
    if io:
        required = set(tool.parameters.get("required") or [])
        params = []
        for name, sub in (tool.parameters.get("properties") or {}).items():
            t = sub.get("type", "any") if isinstance(sub, dict) else "any"
            params.append(f"{name} ({t}{', required' if name in required else ''})")
        lines.append(f"  inputs: {', '.join(params) if params else 'none'}")
        if tool.output:
            lines.append(f"  outputs: {', '.join(s.path for s in output_slots(tool))}")
    return "\n".join(lines)


def tool_list(tools: Iterable[ToolDoc], *, io: bool = True) -> str:
    return "\n".join(tool_line(t, io=io) for t in tools)


def tool_schemas(tools: Iterable[ToolDoc]) -> str:
    return "\n".join(json.dumps(t.openai_schema()["function"], ensure_ascii=False) for t in tools)


def server_fields(server: Server) -> dict[str, str]:
    """The placeholders every prompt about a server shares."""
    return {
        "server_title": server.title,
        "server_description": _short(server.description, 600) or "(none given)",
        "domain": server.domain or "(unspecified)",
    }
