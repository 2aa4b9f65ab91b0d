"""LLM-simulated tools (docs/method.md §1.5).

The simulator sees the tool's schema, the call's arguments, the server description, the last
`history_window` (call, observation) pairs of the episode (for state consistency: an id returned
earlier is found later) and, in half of the episodes, the user's query (so names and ids match
what the user said). Which episodes see the query is decided by a hash of the task key, so a
rerun makes the same choice.

Failure injection (the paper: 20%; **fix**: not in the released scripts): a call fails when a
hash of `(seed, task key, call index)` falls under `failure_rate`; the simulator is then told to
return a realistic error, and a reply that does not fail is sent back for repair. Injected
failures are marked on the call record.

A reply without `{"status": "ok"|"error", "result": ...}` goes back to the model once (the
client's repair round) and then raises `LLMOutputError`: the episode is rejected, since the
observation the agent would see does not exist.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from astra_foundation.llm import LLMClient
from data_synth.prompts import load_prompt
from data_synth.traj import describe
from data_synth.traj.records import Observation, Server, ToolDoc
from env_registry import call_errors
from env_registry.call_gate import CallStatus

MAX_OBSERVATION_CHARS = 8000


def unit_hash(*parts: Any) -> float:
    """A deterministic number in [0, 1) from the parts."""
    digest = hashlib.sha256("\x00".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def sees_query(seed: int, task_key: str, fraction: float) -> bool:
    return unit_hash(seed, task_key, "query") < fraction


def injects_failure(seed: int, task_key: str, call_index: int, rate: float) -> bool:
    return unit_hash(seed, task_key, "fail", call_index) < rate


def observation_text(status: str, result: Any) -> str:
    """What the agent reads: the result (JSON unless a string); an error as RL shows a tool's failure
    (`call_errors.failed`: `Error (exception): <message>`)."""
    text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False)
    if status == "error":
        text = call_errors.failed(text)
    return text if len(text) <= MAX_OBSERVATION_CHARS else text[:MAX_OBSERVATION_CHARS] + " ...[truncated]"


def observation(status: str, result: Any, injected_failure: bool = False) -> Observation:
    """A tool's answer (`status` "ok" or "error", as the simulator and MCP report it) in RL's vocabulary."""
    failed = status == "error"
    return Observation(
        status=CallStatus.TOOL_ERROR if failed else CallStatus.OK,
        content=observation_text(status, result),
        error_kind=call_errors.FAILED_KIND if failed else None,
        injected_failure=injected_failure,
    )


def parse_simulation(value: Any, must_fail: bool) -> tuple[str, Any]:
    if not isinstance(value, dict) or value.get("status") not in ("ok", "error") or "result" not in value:
        raise ValueError('expected {"status": "ok" or "error", "result": ...}')
    if must_fail and value["status"] != "error":
        raise ValueError('this call must fail: reply with "status": "error" and a realistic error message')
    return value["status"], value["result"]


@dataclass
class SimulatedTools:
    """The tools of one episode, simulated. One instance per episode (it holds the history)."""

    client: LLMClient
    server: Server
    task_key: str
    query: str
    failure_rate: float = 0.2
    history_window: int = 5
    show_query_fraction: float = 0.5
    seed: int = 0
    temperature: float | None = None
    history: list[tuple[str, str]] = field(default_factory=list)

    name = "simulated"

    @property
    def shows_query(self) -> bool:
        return sees_query(self.seed, self.task_key, self.show_query_fraction)

    async def call(self, tool: ToolDoc, arguments: dict[str, Any], call_index: int) -> Observation:
        fail = injects_failure(self.seed, self.task_key, call_index, self.failure_rate)
        recent = self.history[-self.history_window :] if self.history_window else []
        messages = load_prompt("traj/simulate_tool").messages(
            "user",
            **describe.server_fields(self.server),
            tool_schema=json.dumps(tool.openai_schema()["function"], ensure_ascii=False),
            history="\n".join(f"{c} -> {o}" for c, o in recent) or "(none)",
            user_query_block=f"\nThe user's request in this session: {self.query}\n" if self.shows_query else "",
            tool_name=tool.name,
            arguments=json.dumps(arguments, ensure_ascii=False),
            failure_instruction=(
                '\nThis call fails. Return status "error" with a realistic error message for this tool '
                "(e.g. a missing resource, an invalid value, a permission problem or a timeout).\n"
                if fail
                else ""
            ),
        )
        reply = await self.client.complete_json(
            messages,
            step="traj.simulate",
            check=lambda v: parse_simulation(v, fail),
            sample=call_index,
            temperature=self.temperature,
        )
        status, result = reply.value
        obs = observation(status, result, injected_failure=fail)
        self.history.append((f"{tool.name}({json.dumps(arguments, ensure_ascii=False)})", obs.content[:600]))
        return obs
