"""Real MCP servers as the tool backend (`interact.backend: mcp`; needs the `mcp` package:
`pip install astra-verl[mcp]`).

The server's `call_info` (ASTRA's per-server field) says how to reach it:

    {"command": "python", "args": ["server.py"], "env": {...}, "cwd": "..."}   stdio (spawned)
    {"url": "http://host:port/mcp"}                                           streamable HTTP

Each episode opens its own connection (for stdio: its own server process), so tool state
never leaks from one episode into another. On connect, the live server's `tools/list` must
offer every tool the record documents; otherwise the episode is rejected (`mcp_tools_missing`).
A tool result with `isError` is a `tool_error` observation, worded as RL words a tool's failure;
a protocol error on a call (unknown tool, bad arguments the server refuses) is shown the same way.
Failure injection does not apply: a real server fails on its own. A server that cannot be
started or reached raises (the record is an `error`; a rerun retries it).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from data_synth.pipeline import Reject

if sys.version_info >= (3, 11):
    from builtins import BaseExceptionGroup
else:  # anyio (an mcp dependency) brings the backport on 3.10
    from exceptiongroup import BaseExceptionGroup
from data_synth.traj.records import Observation, Server, ToolDoc
from data_synth.traj.simulate import observation


def _import_mcp():
    # Lazy: mcp is an optional extra (astra-verl[mcp]); only interact.backend=mcp needs it.
    try:
        import mcp
        from mcp.client.stdio import stdio_client
    except ImportError as e:
        raise RuntimeError(
            "interact.backend=mcp needs the `mcp` package: pip install 'astra-verl[mcp]' (or pip install mcp)"
        ) from e
    return mcp, stdio_client


def _protocol_error() -> type[Exception]:
    """The SDK's protocol-error class: `mcp.MCPError` (2.x) or `mcp.shared.exceptions.McpError` (1.x)."""
    import mcp  # lazy: optional extra, see _import_mcp

    if hasattr(mcp, "MCPError"):
        return mcp.MCPError
    from mcp.shared.exceptions import McpError

    return McpError


def _field(obj: Any, *names: str, default: Any = None) -> Any:
    """mcp 1.x spells result fields in camelCase (`isError`), 2.x in snake_case (`is_error`)."""
    for n in names:
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def result_observation(result: Any) -> Observation:
    """A `CallToolResult` as the agent reads it: structured content as JSON when present, else
    the text of the content blocks (other blocks described by type)."""
    is_error = bool(_field(result, "is_error", "isError", default=False))
    structured = _field(result, "structured_content", "structuredContent")
    if structured is not None:
        payload: Any = structured
    else:
        parts = []
        for block in _field(result, "content", default=[]) or []:
            text = getattr(block, "text", None)
            parts.append(text if isinstance(text, str) else f"[{getattr(block, 'type', 'content')} block]")
        payload = "\n".join(parts)
    return observation("error" if is_error else "ok", payload)


def _single(group: BaseExceptionGroup) -> BaseException:
    leaves: list[BaseException] = []
    stack: list[BaseException] = [group]
    while stack:
        e = stack.pop()
        if isinstance(e, BaseExceptionGroup):
            stack.extend(e.exceptions)
        else:
            leaves.append(e)
    return leaves[0] if len(leaves) == 1 else group


@dataclass
class MCPTools:
    session: Any
    name: str = "mcp"

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, server: Server) -> AsyncIterator[MCPTools]:
        mcp, stdio_client = _import_mcp()
        info = server.call_info or {}
        if info.get("command"):
            params = mcp.StdioServerParameters(
                command=info["command"], args=list(info.get("args", [])), env=info.get("env"), cwd=info.get("cwd")
            )
            transport = stdio_client(params)
        elif info.get("url"):
            from mcp.client import streamable_http

            client = getattr(streamable_http, "streamable_http_client", None) or streamable_http.streamablehttp_client
            transport = client(info["url"])
        else:
            raise Reject(
                "no_mcp_endpoint",
                f"server {server.server_id}: call_info has no 'command' or 'url' ({json.dumps(info)[:200]}); "
                "use interact.backend=simulated for mock servers",
            )
        try:
            async with transport as streams, mcp.ClientSession(streams[0], streams[1]) as session:
                await session.initialize()
                listed = await session.list_tools()
                live = {t.name for t in listed.tools}
                missing = sorted(set(server.tool_names()) - live)
                if missing:
                    raise Reject(
                        "mcp_tools_missing", f"the live server does not offer {missing} (it offers {sorted(live)})"
                    )
                yield cls(session)
        except BaseExceptionGroup as group:
            # The SDK's transports run in task groups, which wrap whatever the episode raised
            # (a Reject, an LLM error); hand the one real exception back to the pipeline.
            raise _single(group) from None

    async def call(self, tool: ToolDoc, arguments: dict[str, Any], call_index: int) -> Observation:
        # No per-call timeout here: the episode's task_timeout_s bounds every call.
        try:
            result = await self.session.call_tool(tool.name, arguments)
        except _protocol_error() as e:
            return observation("error", f"MCP error: {e}")
        return result_observation(result)
