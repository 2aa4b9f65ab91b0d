"""One episode of an exported row against an OpenAI-compatible chat endpoint (evaluation).

`astra_tool_agent` works on token ids inside verl; an evaluation against a served model works
on chat messages. `ChatRollout` runs the same episode at the message level with the same parts:
the row's tools built by the rollout's `ToolCatalog` (schemas, argument validation, sandbox
program), one fresh sandbox session per episode, the row's environment hook (user turns, tools
revealed mid-episode, termination), and the same `EpisodeLog`, so the same scorer reads it.

A step: the conversation goes to the endpoint with the currently shown tools (`data_synth.llm`
client: retries, bounded concurrency, optional cache); the reply's tool calls run in order,
each answered by a `tool` message; a reply without calls ends the user turn and the hook may
deliver the next one. A call that cannot run (unknown tool, arguments that are not a JSON
object or violate the schema) is answered with an error message and logged with its status,
as in `astra_tool_agent`. Observations are not truncated (BFCL does not truncate either).
An endpoint failure (`LLMUnavailable`) propagates: the caller records the entry as an error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from astra_verl.rollout.call_log import CallRecord, EpisodeLog, Termination
from astra_verl.rollout.call_parsing import ParsedCall
from astra_verl.rollout.episode_hook import create_hook
from astra_verl.rollout.hooks import EnvironmentHook, HookAction, HookError
from astra_verl.rollout.toolset import ToolCatalog, Toolset
from data_synth.llm.types import ToolCall
from env_registry.rows import RowInfo, ToolRef
from env_registry.spec import EnvSpec


@dataclass
class ChatEpisode:
    """The state of one chat episode; also the `EpisodeView` hooks read."""

    request_id: str
    env: EnvSpec
    log: EpisodeLog
    toolset: Toolset
    hook: EnvironmentHook
    messages: list[dict[str, Any]]
    shown: list[str]
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def shown_tools(self) -> list[str]:
        return list(self.shown)

    def tool_schemas(self, refs: list[ToolRef] | tuple[ToolRef, ...]) -> list[dict[str, Any]]:
        return self.toolset.schemas([r.name for r in refs])


@dataclass
class ChatResult:
    log: EpisodeLog
    messages: list[dict[str, Any]]
    usage: dict[str, int] = field(default_factory=dict)
    elapsed_s: float = 0.0


class ChatRollout:
    """Runs rows' episodes through `client` (a `data_synth.llm.LLMClient`) and `sandbox`."""

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
        info = RowInfo.from_extra_info(extra_info)
        kwargs = {**dict(extra_info.get("interaction_kwargs") or {}), **self.hook_overrides}
        try:
            hook = create_hook(kwargs, default="astra_default", interaction_config_path=None)
        except HookError as exc:
            raise HookError(f"row of environment {info.env_id}: {exc}") from exc
        toolset = self.catalog.toolset(info, hook.tool_pool())
        messages = [dict(m) for m in _as_list(row["prompt"])]
        return ChatEpisode(
            request_id=uuid4().hex,
            env=self.catalog.spec(info.store, info.env_id),
            log=EpisodeLog(env_id=info.env_id, hook=hook.name or None),
            toolset=toolset,
            hook=hook,
            messages=messages,
            shown=list(toolset.initially_shown),
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
        for index, call in enumerate(completion.tool_calls):
            record, text = await self._run_call(ep, session, index, call)
            ep.log.calls.append(record)
            ep.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
            action = await ep.hook.on_tool_result(ep, record)
            if action is not None:
                terminate |= action.terminate
                await self._apply(ep, HookAction(user_message=action.user_message, add_tools=action.add_tools))
        if terminate:
            ep.log.terminated_by = Termination.HOOK
        elif ep.log.assistant_turns >= self.max_assistant_turns:
            ep.log.terminated_by = Termination.MAX_TURNS

    async def _apply(self, ep: ChatEpisode, action: HookAction | None) -> None:
        if action is None:
            return
        for ref in action.add_tools:
            tool = ep.toolset.tools.get(ref.name)
            if tool is None or (tool.env_id, tool.distractor) != (ref.env_id, ref.distractor):
                raise HookError(f"hook {ep.hook.name!r} adds tool {ref} that its tool_pool() did not declare")
            if ref.name not in ep.shown:
                ep.shown.append(ref.name)
        if action.user_message:
            ep.messages.append({"role": "user", "content": action.user_message})
            ep.log.user_turns += 1
        if action.terminate:
            ep.log.terminated_by = Termination.HOOK

    async def _run_call(self, ep: ChatEpisode, session: Any, index: int, call: ToolCall) -> tuple[CallRecord, str]:
        parsed = ParsedCall(
            name=call.name,
            arguments=call.args,
            raw=call.arguments,
            error_kind=None if call.args is not None else "bad_json",
            error=call.error or "",
        )

        async def opened() -> Any:
            return session

        record = await ep.toolset.execute(
            parsed, ep.shown, self.sandbox, opened, turn=ep.log.assistant_turns, index=index
        )
        return record, record.output


def _as_list(value: Any) -> list[Any]:
    return value.tolist() if hasattr(value, "tolist") else list(value)
