"""Real MCP tools: a tiny stdio MCP server written here, ingested from its own tools/list
result, then driven by an episode through the `mcp` client's ClientSession. Needs the optional
`mcp` package (`astra-verl[mcp]`, part of the test extra, so CI always runs it): without it this
module fails to import, saying so."""

from __future__ import annotations

import asyncio
import json
import sys

import mcp  # the test extra installs it: a missing one is an error, not a skip

from astra_foundation.llm import LLMConfig, build_client
from data_synth.pipeline import process_one
from data_synth.traj import steps as S
from data_synth.traj.ingest import build_server, read_sources
from data_synth.traj.interact import InteractConfig
from data_synth.traj.records import ScoredTask, Scores, Task

SERVER = '''
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

app = MCPServer("notes")
NOTES = {}


@app.tool()
def add_note(title: str, body: str) -> str:
    """Save a note under a title."""
    NOTES[title] = body
    return f"saved {title}"


@app.tool()
def get_note(title: str) -> str:
    """Read the note with this title."""
    if title not in NOTES:
        raise ToolError(f"no note titled {title!r}")
    return NOTES[title]


@app.tool()
def list_notes() -> str:
    """Titles of all notes."""
    return ", ".join(sorted(NOTES)) or "(none)"


if __name__ == "__main__":
    app.run()
'''


async def _list_tools(script):
    from mcp.client.stdio import stdio_client

    params = mcp.StdioServerParameters(command=sys.executable, args=[str(script)])
    async with stdio_client(params) as streams, mcp.ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        listed = await session.list_tools()
        return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed.tools]


def _agent(step, payload):
    turn = sum(1 for m in payload["messages"] if m["role"] == "assistant")
    plan = [
        {"content": "", "tool_calls": [{"name": "add_note", "arguments": {"title": "milk", "body": "buy 2 litres"}}]},
        {"content": "", "tool_calls": [{"name": "get_note", "arguments": {"title": "milk"}}]},
        {"content": "", "tool_calls": [{"name": "get_note", "arguments": {"title": "eggs"}}]},
        "Your note 'milk' says: buy 2 litres. There is no note about eggs.",
    ]
    return plan[min(turn, len(plan) - 1)]


def _scored(server_id):
    task = Task.create(
        server_id=server_id,
        source="server",
        tools=["add_note", "get_note"],
        query="Save a note about milk and read it back.",
        prompt="p@v1",
    )
    return ScoredTask(key=task.key, task=task, scores=Scores(question_quality=5, scenario_realism=5, tool_necessity=5))


def test_episode_against_a_real_stdio_mcp_server(tmp_path):
    script = tmp_path / "notes_server.py"
    script.write_text(SERVER)
    tools = asyncio.run(_list_tools(script))
    listing = tmp_path / "notes.json"
    listing.write_text(
        json.dumps(
            {
                "tools": tools,
                "serverInfo": {"name": "notes"},
                "call_info": {"command": sys.executable, "args": [str(script)]},
            }
        )
    )
    server = build_server(read_sources([listing])[0])
    assert server.tool_names() == ["add_note", "get_note", "list_notes"] and server.source.format == "mcp"

    agent = build_client(LLMConfig(max_retries=0), responder=_agent)
    ctx = S.TrajContext(llm=None, servers={server.server_id: server}, agent=agent)
    env = asyncio.run(process_one(S.InteractStep(InteractConfig(backend="mcp")), _scored(server.server_id), ctx))
    assert env.status == "ok", env.detail
    traj = env.out[0]
    assert traj["backend"] == "mcp"
    calls = traj["calls"]
    assert [c["status"] for c in calls] == ["ok", "ok", "tool_error"]
    assert "saved milk" in calls[0]["observation"] and "buy 2 litres" in calls[1]["observation"]
    assert (
        calls[2]["observation"].startswith("Error (exception): ")
        and "no note titled 'eggs'" in calls[2]["observation"]
        and not any(c["injected_failure"] for c in calls)
    )

    # A record whose live server lacks a documented tool, and one with no endpoint, are rejected.
    extra = server.model_copy(
        update={"tools": [*server.tools, server.tools[0].model_copy(update={"name": "delete_note"})]}
    )
    ctx.servers = {server.server_id: extra}
    env = asyncio.run(process_one(S.InteractStep(InteractConfig(backend="mcp")), _scored(server.server_id), ctx))
    assert env.status == "rejected" and env.reason == "mcp_tools_missing" and "delete_note" in env.detail
    ctx.servers = {server.server_id: server.model_copy(update={"call_info": {"mock_tool": True}})}
    env = asyncio.run(process_one(S.InteractStep(InteractConfig(backend="mcp")), _scored(server.server_id), ctx))
    assert env.status == "rejected" and env.reason == "no_mcp_endpoint"
