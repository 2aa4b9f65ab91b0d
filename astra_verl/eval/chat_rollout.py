"""One episode of an exported row against an OpenAI-compatible chat endpoint (evaluation).

`astra_tool_agent` works on token ids inside verl; an evaluation against a served model works
on chat messages. `ChatRollout` runs the same episode at the message level with the same parts:
the row's tools built by the rollout's `ToolCatalog` (schemas, argument validation, sandbox
program), one fresh sandbox session per episode, the row's environment hook (user turns, tools
revealed mid-episode, termination), and the same `EpisodeLog`, so the same scorer reads it.

The episode's rules are `env_registry.episode_driver`'s, as in `astra_tool_agent` and
trajectory synthesis: this class is the driver's chat transport. A step: the conversation goes to
the endpoint with the currently shown tools (`astra_foundation.llm` client: retries, bounded
concurrency, optional cache); the reply is the driver's turn (its tool calls, each malformed one
too, run in order, each answered by a `tool` message; a reply without calls ends the user turn
and the hook may deliver the next one). A reply the endpoint cut at its token budget
(`finish_reason == "length"`) is the turn at the response limit. A call that cannot run (unknown
tool, arguments that are not a JSON object, empty ones included, or violate the schema) is
answered with an error message and logged with its status. Observations are not truncated
(BFCL does not truncate either). The caps are `limits` (default: 512 assistant turns, a safety
net; BFCL's own limits are its hook's). An endpoint failure (`LLMUnavailable`) propagates: the
caller records the entry as an error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from astra_foundation.llm.types import ToolCall
from astra_verl.calls.call_log import CallRecord, EpisodeLog
from astra_verl.rollout.episode import Episode
from astra_verl.rollout.toolset import ToolCatalog
from env_registry.call_gate import CallStatus
from env_registry.episode_driver import AssistantTurn, CallResult, EpisodeDriver, EpisodeLimits, ParsedCall, Settled

DEFAULT_LIMITS = EpisodeLimits(max_assistant_turns=512)


@dataclass
class ChatEpisode(Episode):
    """One chat episode: the shared `Episode` (the hooks' `EpisodeView`) plus token usage."""

    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class ChatResult:
    log: EpisodeLog
    messages: list[dict[str, Any]]
    usage: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0


class ChatRollout:
    """Runs rows' episodes through `client` (a `astra_foundation.llm.LLMClient`) and `sandbox`."""

    def __init__(
        self,
        client: Any,
        sandbox: Any,
        *,
        catalog: ToolCatalog | None = None,
        limits: EpisodeLimits = DEFAULT_LIMITS,
        hook_overrides: dict[str, Any] | None = None,
        step: str = "eval.agent",
        **params: Any,
    ):
        self.client = client
        self.sandbox = sandbox
        self.catalog = catalog or ToolCatalog()
        self.limits = limits
        self.hook_overrides = dict(hook_overrides or {})
        self.step = step
        self.params = params  # extra request parameters (temperature, max_tokens ...)

    def _episode(self, row: dict[str, Any]) -> ChatEpisode:
        extra_info = row.get("extra_info") or {}
        return ChatEpisode.open(
            self.catalog,
            extra_info,
            {**dict(extra_info.get("interaction_kwargs") or {}), **self.hook_overrides},
            _as_list(row["prompt"]),
            request_id=uuid4().hex,
            default_hook="astra_default",
        )

    async def run(self, row: dict[str, Any], *, sample: int = 0, step: str | None = None) -> ChatResult:
        """Run one row's episode; `step` labels its requests (default: the rollout's)."""
        t0 = time.perf_counter()
        ep = self._episode(row)
        session = await self.sandbox.open_session(ep.toolset.program)
        driver = EpisodeDriver(ep, ChatTransport(ep, self.sandbox, session), self.limits, ep.hook)
        try:
            await driver.reset()
            while not driver.done:
                await driver.step(await self._generate(ep, sample, step or self.step))
            await driver.close()
        finally:
            await self.sandbox.close_session(session)
        usage = {"prompt_tokens": ep.prompt_tokens, "completion_tokens": ep.completion_tokens}
        return ChatResult(log=ep.log, messages=ep.messages, usage=usage, elapsed_s=time.perf_counter() - t0)

    async def _generate(self, ep: ChatEpisode, sample: int, step: str) -> AssistantTurn:
        completion = await self.client.complete(
            ep.messages, step=step, sample=sample, tools=ep.toolset.schemas(ep.shown), **self.params
        )
        ep.prompt_tokens += completion.usage.prompt_tokens
        ep.completion_tokens += completion.usage.completion_tokens
        return AssistantTurn(
            content=completion.text.strip(),  # stripped, as the token loop's parser strips a turn's content
            calls=tuple(parsed_call(c) for c in completion.tool_calls),
            at_limit=completion.finish_reason == "length",
        )


@dataclass
class ChatTransport:
    """The driver's transport at the message level: calls in the episode's session, no token budget."""

    ep: ChatEpisode
    sandbox: Any
    session: Any

    async def run_call(self, turn: int, index: int, call_id: str, call: ParsedCall) -> CallResult:
        async def opened() -> Any:
            return self.session

        record = await self.ep.toolset.execute(
            call, self.ep.shown, self.sandbox, opened, turn=turn, index=index, call_id=call_id
        )
        return CallResult(record.status, record.output, record)

    def skipped(self, turn: int, index: int, call_id: str, call: ParsedCall, text: str) -> CallResult:
        record = self.ep.toolset.skipped(call, text, turn=turn, index=index, call_id=call_id)
        return CallResult(CallStatus.SKIPPED, text, record)

    async def admit(self, previous: list[dict[str, Any]], records: list[CallRecord]) -> bool:
        return True  # messages, not tokens: the endpoint's context window is its own check

    async def settle(self, records: list[CallRecord]) -> Settled:
        return Settled.GO_ON  # evaluation scores whole episodes: no early stop when all is solved


def parsed_call(call: ToolCall) -> ParsedCall:
    """The call attempt an OpenAI tool call is (`ParsedCall.from_openai`, as trajectory synthesis reads it)."""
    return ParsedCall.from_openai(call)


def _as_list(value: Any) -> list[Any]:
    return value.tolist() if hasattr(value, "tolist") else list(value)
