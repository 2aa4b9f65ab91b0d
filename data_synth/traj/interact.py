"""Interaction (step 6, docs/method.md §1.5): an agent LLM solves a task by function calling against the
server's tools, simulated (`simulate.py`) or real (`mcp_tools.py`).

One episode is a small state machine, like verl's tool agent loop:

    GENERATING  -- the agent's reply has tool calls -->  CALLING_TOOLS  --> GENERATING
    GENERATING  -- a reply without tool calls ------->  DONE (its text is the final answer)

- At most `max_llm_calls` agent calls (paper: 20); an episode that reaches the cap while still
  calling tools is rejected (`no_final_answer`), as is an empty final answer.
- Every call is checked before anything runs it, by `env_registry.call_check` (RL's check):
  arguments that are not a JSON object, an unknown tool, arguments against the tool's JSON
  Schema -> the agent gets RL's refusal text and the call is recorded with RL's status
  (`bad_json`, `unknown_tool`, `schema_error`; data the judge scores, not a crash).
- Call ids are renumbered `call_<n>` across the episode so every `tool` message answers
  exactly one call, whatever ids the model wrote.
- The whole episode runs under `task_timeout_s`; a timeout is an `error` (a rerun retries it).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, Protocol

from pydantic import model_validator

from astra_foundation.llm import Completion, LLMClient, ToolCall
from astra_foundation.strict import StrictModel
from data_synth.pipeline import Reject
from data_synth.prompts import load_prompt
from data_synth.traj.records import Observation, ScoredTask, Server, ToolDoc, Trajectory, TrajectoryCall
from env_registry.arguments import argument_validator
from env_registry.call_check import Refusal, openai_arguments
from env_registry.call_check import check_call as shared_check


class InteractConfig(StrictModel):
    section = "interact"

    max_llm_calls: int = 20
    task_timeout_s: float = 600.0
    failure_rate: float = 0.2
    history_window: int = 5
    show_query_fraction: float = 0.5
    seed: int = 0
    backend: Literal["simulated", "mcp"] = "simulated"
    system_prompt: bool = True
    agent_temperature: float | None = None
    simulator_temperature: float | None = None

    @model_validator(mode="after")
    def _check(self) -> InteractConfig:
        if not 0.0 <= self.failure_rate <= 1.0:
            raise ValueError(f"failure_rate must be in [0, 1], got {self.failure_rate}")
        if self.max_llm_calls < 1:
            raise ValueError("max_llm_calls must be >= 1")
        return self


class ToolBackend(Protocol):
    """Runs a validated call. `name` goes on the trajectory."""

    name: str

    async def call(self, tool: ToolDoc, arguments: dict[str, Any], call_index: int) -> Observation: ...


class State(Enum):
    GENERATING = "generating"
    CALLING_TOOLS = "calling_tools"
    DONE = "done"


def check_call(call: ToolCall, server: Server) -> tuple[ToolDoc | None, Refusal | None]:
    """(tool, None) for a call that may run, or (None, the refusal): `env_registry.call_check`, the
    check and the wording RL's toolset uses, so SFT data shows the refusals RL gives."""
    args, error = openai_arguments(call)
    refusal = shared_check(
        call.name,
        args,
        server.tool_names(),
        lambda name: argument_validator(server.tool(name).parameters),
        error=error,
    )
    return (None, refusal) if refusal is not None else (server.tool(call.name), None)


@dataclass
class TrajectoryEpisode:
    """The mutable state of one episode."""

    messages: list[dict[str, Any]]
    calls: list[TrajectoryCall]
    llm_calls: int = 0
    last: Completion | None = None


async def _handle_calls(ep: TrajectoryEpisode, server: Server, backend: ToolBackend) -> None:
    assert ep.last is not None
    turn = ep.llm_calls
    tool_calls = []
    pending: list[tuple[str, ToolCall]] = []
    for call in ep.last.tool_calls:
        cid = f"call_{len(ep.calls) + len(pending)}"
        tool_calls.append({"id": cid, "type": "function", "function": {"name": call.name, "arguments": call.arguments}})
        pending.append((cid, call))
    ep.messages.append({"role": "assistant", "content": ep.last.text, "tool_calls": tool_calls})
    for cid, call in pending:
        index = len(ep.calls)
        tool, refusal = check_call(call, server)
        if refusal is not None:
            obs = Observation(status=refusal.status, content=refusal.text, error_kind=refusal.error_kind)
        else:
            assert tool is not None
            obs = await backend.call(tool, call.args or {}, index)
        ep.calls.append(
            TrajectoryCall(
                index=index,
                turn=turn,
                id=cid,
                name=call.name,
                arguments=call.arguments,
                status=obs.status,
                error_kind=obs.error_kind,
                injected_failure=obs.injected_failure,
                observation=obs.content,
            )
        )
        ep.messages.append({"role": "tool", "tool_call_id": cid, "name": call.name, "content": obs.content})


async def _run(
    agent: LLMClient, server: Server, item: ScoredTask, backend: ToolBackend, cfg: InteractConfig
) -> TrajectoryEpisode:
    task = item.task
    messages: list[dict[str, Any]] = []
    if cfg.system_prompt:
        messages.append({"role": "system", "content": load_prompt("traj/agent_system").render("system")})
    messages.append({"role": "user", "content": task.query})
    ep = TrajectoryEpisode(messages=messages, calls=[])
    tools = server.openai_tools()
    state = State.GENERATING
    while state is not State.DONE:
        if state is State.GENERATING:
            if ep.llm_calls >= cfg.max_llm_calls:
                raise Reject("no_final_answer", f"still calling tools after {cfg.max_llm_calls} agent LLM calls")
            ep.last = await agent.complete(
                ep.messages, step="traj.agent", tools=tools, temperature=cfg.agent_temperature
            )
            ep.llm_calls += 1
            state = State.CALLING_TOOLS if ep.last.tool_calls else State.DONE
        else:
            await _handle_calls(ep, server, backend)
            state = State.GENERATING
    final = (ep.last.text if ep.last else "").strip()
    if not final:
        raise Reject("empty_final_answer", f"the agent's last reply (call {ep.llm_calls}) has no text and no tool call")
    ep.messages.append({"role": "assistant", "content": final})
    return ep


async def run_episode(
    agent: LLMClient, server: Server, item: ScoredTask, backend: ToolBackend, cfg: InteractConfig
) -> Trajectory:
    """One trajectory, or `Reject` (no final answer, simulator junk), or `TimeoutError`."""
    try:
        ep = await asyncio.wait_for(_run(agent, server, item, backend, cfg), timeout=cfg.task_timeout_s)
    except TimeoutError:
        raise TimeoutError(f"episode exceeded task_timeout_s={cfg.task_timeout_s:g}") from None
    return Trajectory(
        key=item.key,
        task=item.task,
        server_id=server.server_id,
        messages=ep.messages,
        tools=server.openai_tools(),
        calls=ep.calls,
        llm_calls=ep.llm_calls,
        backend=backend.name,
        simulator_saw_query=getattr(backend, "shows_query", None),
        final_answer=ep.messages[-1]["content"],
    )
