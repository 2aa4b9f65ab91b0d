"""Interaction (step 6, docs/method.md §1.5): an agent LLM solves a task by function calling against the
server's tools, simulated (`simulate.py`) or real (`mcp_tools.py`).

One episode runs on `env_registry.episode_driver`, the driver RL and the evaluation run theirs
on, so SFT data shows the episodes RL gives: the same transcript (every call attempt in its
assistant message under an id `call_<n>`, one tool message answering each id), the same caps,
the same refusals. This module is the driver's synthesis transport:

- At most `max_llm_calls` agent turns (paper: 20, the driver's `max_assistant_turns`); an
  episode that reaches the cap while still calling tools is rejected (`no_final_answer`), as is
  an empty final answer.
- At most `max_parallel_calls` calls run per turn (RL's `multi_turn.max_parallel_calls`, 8 in
  `astra_grpo`); the rest are answered "Not executed" and recorded `skipped`, as RL does.
- Every call is checked before anything runs it, by `env_registry.call_gate` (RL's check):
  arguments that are not a JSON object, an unknown tool, arguments against the tool's JSON
  Schema -> the agent gets RL's refusal text and the call is recorded with RL's status
  (`bad_json`, `unknown_tool`, `schema_error`; data the judge scores, not a crash).
- The whole episode runs under `task_timeout_s`; a timeout is an `error` (a rerun retries it).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from pydantic import Field, model_validator

from astra_foundation.llm import LLMClient, ToolCall
from astra_foundation.strict import StrictModel
from data_synth.pipeline import Reject
from data_synth.prompts import load_prompt
from data_synth.traj.records import Observation, ScoredTask, Server, ToolDoc, Trajectory, TrajectoryCall
from env_registry.arguments import argument_validator
from env_registry.call_gate import CallStatus, Refusal
from env_registry.call_gate import check_call as shared_check
from env_registry.episode_driver import (
    AssistantTurn,
    CallResult,
    EpisodeCounts,
    EpisodeDriver,
    EpisodeHook,
    EpisodeLimits,
    ParsedCall,
    Settled,
    SilentHook,
    Termination,
)
from env_registry.rows import ToolRef


class InteractConfig(StrictModel):
    section = "interact"

    max_llm_calls: int = 20
    max_parallel_calls: int | None = Field(default=8, ge=1)  # None: no cap
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


def check_call(call: ToolCall | ParsedCall, server: Server) -> tuple[ToolDoc | None, Refusal | None]:
    """(tool, None) for a call that may run, or (None, the refusal): `env_registry.call_gate`, the
    check and the wording RL's toolset uses, so SFT data shows the refusals RL gives."""
    attempt = call if isinstance(call, ParsedCall) else ParsedCall.from_openai(call)
    refusal = shared_check(
        attempt.name,
        attempt.arguments,
        server.tool_names(),
        lambda name: argument_validator(server.tool(name).parameters),
        error=attempt.error,
    )
    return (None, refusal) if refusal is not None else (server.tool(attempt.name or ""), None)


@dataclass
class TrajectoryEpisode:
    """The episode the driver runs: the transcript and the driver's log (`log.calls`: `TrajectoryCall`s)."""

    messages: list[dict[str, Any]]
    log: EpisodeCounts = field(default_factory=EpisodeCounts)

    def reveal(self, refs: Iterable[ToolRef]) -> None:
        if list(refs):
            raise ValueError("trajectory synthesis has no environment hook: nothing may add tools")


@dataclass
class SynthesisTransport:
    """The driver's transport in synthesis: checked calls run by the backend (simulated or MCP)."""

    ep: TrajectoryEpisode
    server: Server
    backend: ToolBackend

    async def run_call(self, turn: int, index: int, call_id: str, call: ParsedCall) -> CallResult:
        number = len(self.ep.log.calls)  # a trajectory numbers its calls over the episode
        tool, refusal = check_call(call, self.server)
        if refusal is not None:
            obs = Observation(status=refusal.status, content=refusal.text, error_kind=refusal.error_kind)
        else:
            assert tool is not None and call.arguments is not None  # check_call refuses anything else
            obs = await self.backend.call(tool, call.arguments, number)
        return CallResult(obs.status, obs.content, self._record(turn, number, call_id, call, obs))

    def skipped(self, turn: int, index: int, call_id: str, call: ParsedCall, text: str) -> CallResult:
        obs = Observation(status=CallStatus.SKIPPED, content=text, error_kind=call.error_kind)
        return CallResult(obs.status, text, self._record(turn, len(self.ep.log.calls), call_id, call, obs))

    @staticmethod
    def _record(turn: int, number: int, call_id: str, call: ParsedCall, obs: Observation) -> TrajectoryCall:
        return TrajectoryCall(
            index=number,
            turn=turn,
            id=call_id,
            name=call.name or "",
            arguments=call.raw,
            status=obs.status,
            error_kind=obs.error_kind,
            injected_failure=obs.injected_failure,
            observation=obs.content,
        )

    async def admit(self, previous: list[dict[str, Any]], records: list[Any]) -> bool:
        return True  # messages, not tokens

    async def settle(self, records: list[Any]) -> Settled:
        return Settled.GO_ON


async def drive(
    agent: LLMClient,
    ep: TrajectoryEpisode,
    server: Server,
    backend: ToolBackend,
    limits: EpisodeLimits,
    *,
    hook: EpisodeHook | None = None,
    temperature: float | None = None,
) -> None:
    """Run `ep` to its end on the episode driver. Synthesis's answerable episodes have no
    environment hook (one user turn); `hook` is the driver's, for an episode that has one (a
    missing-value task's LLM user, `variants.LLMUserHook`)."""
    driver = EpisodeDriver(ep, SynthesisTransport(ep, server, backend), limits, hook or SilentHook())
    tools = server.openai_tools()
    await driver.reset()
    while not driver.done:
        last = await agent.complete(ep.messages, step="traj.agent", tools=tools, temperature=temperature)
        calls = tuple(ParsedCall.from_openai(c) for c in last.tool_calls)
        await driver.step(AssistantTurn(content=last.text.strip(), calls=calls))
    await driver.close()


async def _run(
    agent: LLMClient,
    server: Server,
    item: ScoredTask,
    backend: ToolBackend,
    cfg: InteractConfig,
    hook: EpisodeHook | None,
) -> TrajectoryEpisode:
    messages: list[dict[str, Any]] = []
    if cfg.system_prompt:
        messages.append({"role": "system", "content": load_prompt("traj/agent_system").render("system")})
    messages.append({"role": "user", "content": item.task.query})
    ep = TrajectoryEpisode(messages=messages)
    limits = EpisodeLimits(max_assistant_turns=cfg.max_llm_calls, max_parallel_calls=cfg.max_parallel_calls)
    await drive(agent, ep, server, backend, limits, hook=hook, temperature=cfg.agent_temperature)
    if ep.log.terminated_by is not Termination.NO_TOOL_CALL:
        raise Reject("no_final_answer", f"still calling tools after {cfg.max_llm_calls} agent LLM calls")
    if not ep.log.final_answer:
        turns = ep.log.assistant_turns
        raise Reject("empty_final_answer", f"the agent's last reply (call {turns}) has no text and no tool call")
    return ep


async def run_episode(
    agent: LLMClient,
    server: Server,
    item: ScoredTask,
    backend: ToolBackend,
    cfg: InteractConfig,
    *,
    hook: EpisodeHook | None = None,
) -> Trajectory:
    """One trajectory, or `Reject` (no final answer, simulator junk), or `TimeoutError`. `server` is
    what the agent is offered; `hook` the episode's (a missing-value task's LLM user; None: none)."""
    try:
        ep = await asyncio.wait_for(_run(agent, server, item, backend, cfg, hook), timeout=cfg.task_timeout_s)
    except TimeoutError:
        raise TimeoutError(f"episode exceeded task_timeout_s={cfg.task_timeout_s:g}") from None
    return Trajectory(
        key=item.key,
        task=item.task,
        server_id=server.server_id,
        messages=ep.messages,
        tools=server.openai_tools(),
        calls=ep.log.calls,
        llm_calls=ep.log.assistant_turns,
        backend=backend.name,
        simulator_saw_query=getattr(backend, "shows_query", None),
        final_answer=ep.log.final_answer,
    )
