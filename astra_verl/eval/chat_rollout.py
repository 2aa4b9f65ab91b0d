"""One episode of an exported row against an OpenAI-compatible chat endpoint (evaluation).

`astra_tool_agent` works on token ids inside verl; an evaluation against a served model works
on chat messages. `ChatRollout` runs the same episode at the message level with the same parts:
the row's tools built by the rollout's `ToolCatalog` (schemas, argument validation, sandbox
program), one fresh sandbox session per episode, the row's environment hook (user turns, tools
revealed mid-episode, termination), and the same `EpisodeLog`, so the same scorer reads it.

A step: the conversation goes to the endpoint with the currently shown tools (`astra_foundation.llm`
client: retries, bounded concurrency, optional cache); the reply's tool calls run in order,
each answered by a `tool` message; a reply without calls ends the user turn and the hook may
deliver the next one. A call that cannot run (unknown tool, arguments that are not a JSON
object, empty ones included, or violate the schema) is answered with an error message and logged with its status,
as in `astra_tool_agent`. Observations are not truncated (BFCL does not truncate either).
An endpoint failure (`LLMUnavailable`) propagates: the caller records the entry as an error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from astra_foundation.llm.types import ToolCall
from astra_verl.calls.call_log import CallRecord, EpisodeLog, Termination
from astra_verl.rollout.call_parsing import ParsedCall
from astra_verl.rollout.episode import Episode
from astra_verl.rollout.hooks import HookAction
from astra_verl.rollout.toolset import ToolCatalog
from env_registry.call_check import openai_arguments


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
        max_assistant_turns: int = 512,
        hook_overrides: dict[str, Any] | None = None,
        step: str = "eval.agent",
        **params: Any,
    ):
        self.client = client
        self.sandbox = sandbox
        self.catalog = catalog or ToolCatalog()
        self.max_assistant_turns = max_assistant_turns  # a safety net; BFCL's limit is the hook's
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
        try:
            await self._apply(ep, await ep.hook.on_start(ep))
            while ep.log.terminated_by is None:
                await self._step(ep, session, sample, step or self.step)
            ep.log.hook_state = await ep.hook.on_end(ep)
        finally:
            await self.sandbox.close_session(session)
        usage = {"prompt_tokens": ep.prompt_tokens, "completion_tokens": ep.completion_tokens}
        return ChatResult(log=ep.log, messages=ep.messages, usage=usage, elapsed_s=time.perf_counter() - t0)

    async def _step(self, ep: ChatEpisode, session: Any, sample: int, step: str) -> None:
        completion = await self.client.complete(
            ep.messages, step=step, sample=sample, tools=ep.toolset.schemas(ep.shown), **self.params
        )
        ep.prompt_tokens += completion.usage.prompt_tokens
        ep.completion_tokens += completion.usage.completion_tokens
        ep.log.assistant_turns += 1
        ep.messages.append(completion.message())
        if not completion.tool_calls:
            ep.log.final_answer = completion.text
            action = await ep.hook.on_assistant_end(ep, completion.text)
            if action is None or not (action.user_message or action.terminate):
                ep.log.terminated_by = Termination.NO_TOOL_CALL
                return
            await self._apply(ep, action)
            return
        terminate = False
        records: list[CallRecord] = []
        for index, call in enumerate(completion.tool_calls):
            record, text = await self._run_call(ep, session, index, call)
            records.append(record)
            ep.log.calls.append(record)
            ep.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
            terminate |= await self._apply_midturn(ep, await ep.hook.on_tool_result(ep, record))
        terminate |= await self._apply_midturn(ep, await ep.hook.on_tool_round_end(ep, records))
        if terminate:
            ep.log.terminated_by = Termination.HOOK
        elif ep.log.assistant_turns >= self.max_assistant_turns:
            ep.log.terminated_by = Termination.MAX_TURNS

    async def _apply_midturn(self, ep: ChatEpisode, action: HookAction | None) -> bool:
        """Apply a hook's action taken during the tool calls; the episode ends after the turn's calls."""
        if action is None:
            return False
        await self._apply(ep, HookAction(user_message=action.user_message, add_tools=action.add_tools))
        return action.terminate

    async def _apply(self, ep: ChatEpisode, action: HookAction | None) -> None:
        if action is None:
            return
        ep.reveal(action.add_tools)
        if action.user_message:
            ep.messages.append({"role": "user", "content": action.user_message})
            ep.log.user_turns += 1
        if action.terminate:
            ep.log.terminated_by = Termination.HOOK

    async def _run_call(self, ep: ChatEpisode, session: Any, index: int, call: ToolCall) -> tuple[CallRecord, str]:
        parsed = parsed_call(call)

        async def opened() -> Any:
            return session

        record = await ep.toolset.execute(
            parsed, ep.shown, self.sandbox, opened, turn=ep.log.assistant_turns, index=index
        )
        return record, record.output


def parsed_call(call: ToolCall) -> ParsedCall:
    """The call attempt an OpenAI tool call is: malformed unless its argument string is a JSON object
    (`env_registry.call_check.openai_arguments`, as trajectory synthesis reads it)."""
    args, error = openai_arguments(call)
    return ParsedCall(
        name=call.name,
        arguments=args,
        raw=call.arguments,
        error_kind=None if args is not None else "bad_json",
        error=error,
    )


def _as_list(value: Any) -> list[Any]:
    return value.tolist() if hasattr(value, "tolist") else list(value)
