"""The `tau_user` hook: τ-bench's simulated user inside an `astra_tool_agent` episode.

The user holds the task's instruction; the agent sees only the policy (system prompt) and what
the user says. Each user message is a hook `user_message` (an observation, loss-masked like
every hook message). The episode ends when the user says `###STOP###` (τ-bench: `done` when the
user's reply contains it), when the agent calls a terminate tool (τ-bench's `terminate_tools`,
transfer_to_human_agents), or by the loop's own limits.

interaction_kwargs (strings only, parquet-friendly):
    name: "tau_user"; task: "domain/split/index"; terminate_tools: JSON list;
    user: "scripted" with script: JSON list of user messages (the first opens the conversation;
        after the last one the user says ###STOP###; entries are `UserTurn`s, as
        astra_verl.rollout.hooks reads every hook's turns): tests and dry runs;
    user: "llm" with instruction, base_url, model (an OpenAI-compatible endpoint, through
        `astra_foundation.llm`): τ-bench's default user strategy ("llm"): its system prompt (taken from
        the installed τ-bench, `LLMUserSimulationEnv.build_system_prompt`), the conversation
        with roles swapped, opened by the agent's "Hi! How can I help you today?".

Final state (`on_end`, read by the `astra_tau` reward): the agent's messages to the user
(`responses`: each assistant turn that ended without tool calls, τ-bench's `respond` actions),
the user turns the row lists (`user_turn_counts`, the convention of every hook: the user's
opening message goes into the prompt, so the turns after it are counted; a scripted user lists
`len(script) - 1` of them, an LLM user is open-ended; the delivered ones are
`EpisodeLog.user_turns`), and why it ended. Like τ-bench's `Env.step`, any call of a terminate
tool ends the episode, one whose arguments fail too (τ-bench sets `done` whatever the tool
returned; `astra_verl.reward.tau.ends_episode`).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from astra_verl.reward.tau import ends_episode
from astra_verl.rollout.hooks import (
    EnvironmentHook,
    EpisodeView,
    HookAction,
    HookError,
    parse_user_turns,
    register_hook,
    user_turn_counts,
)
from env_registry.llm_user import RoleSwappedChat

HOOK_NAME = "tau_user"
STOP = "###STOP###"
OPENING = "Hi! How can I help you today?"  # τ-bench's LLMUserSimulationEnv.reset: the agent's first line


@cache
def user_system_prompt(instruction: str) -> str:
    """τ-bench's default user strategy's system prompt for `instruction`, from τ-bench itself."""
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # Lazy: τ-bench is optional; its user module imports litellm at import.
    from tau_bench.envs.user import LLMUserSimulationEnv

    # build_system_prompt reads nothing of the instance (its constructor would call the model).
    return LLMUserSimulationEnv.build_system_prompt(None, instruction)


class ScriptedUser:
    """The user turns of `interaction_kwargs.script` (`UserTurn`s with content, no tools), in order."""

    def __init__(self, raw: Any):
        turns = parse_user_turns(raw, HOOK_NAME, key="script")
        if not turns:
            raise HookError("tau_user: a scripted user needs at least one message (interaction_kwargs.script)")
        if any(t.content is None or t.add_tools for t in turns):
            raise HookError("tau_user: script turns are messages (τ-bench's user words each one and adds no tools)")
        self.script = [t.content or "" for t in turns]
        self.said = 0

    async def aclose(self) -> None:
        return None

    async def reply(self, agent_message: str | None) -> str:
        if self.said >= len(self.script):
            return STOP
        self.said += 1
        return self.script[self.said - 1]


class LLMUser(RoleSwappedChat):
    """τ-bench's LLM user: the conversation with roles swapped, under τ-bench's user prompt, opened
    by the agent's greeting."""

    def __init__(self, instruction: str, base_url: str, model: str, *, max_tokens: int | None, timeout_s: float):
        super().__init__(
            user_system_prompt(instruction),
            base_url,
            model,
            step="tau.user",
            opening=({"role": "user", "content": OPENING},),
            max_tokens=max_tokens,
            timeout_s=timeout_s,
        )


def _number(kwargs: dict[str, Any], key: str, kind: type, default: Any) -> Any:
    """A positive number the row carries as a string (parquet-friendly), or `default` when absent."""
    raw = kwargs.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        value = None
    if value is None or value <= 0:
        raise HookError(f"tau_user: interaction_kwargs.{key} must be a positive {kind.__name__}, got {raw!r}")
    return value


def _strings(kwargs: dict[str, Any], key: str) -> list[str]:
    raw = kwargs.get(key)
    try:
        value = json.loads(raw) if isinstance(raw, str | bytes) else raw
    except ValueError as exc:
        raise HookError(f"tau_user: interaction_kwargs.{key} is not JSON ({exc})") from exc
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise HookError(f"tau_user: interaction_kwargs.{key} must be a list of strings, got {raw!r}")
    return value


@register_hook(HOOK_NAME)
class TauUserHook(EnvironmentHook):
    """See the module docstring."""

    def __init__(self, kwargs: dict[str, Any]):
        super().__init__(kwargs)
        kind = kwargs.get("user")
        if kind == "scripted":
            self.user: ScriptedUser | LLMUser = ScriptedUser(kwargs.get("script"))
        elif kind == "llm":
            missing = [k for k in ("instruction", "base_url", "model") if not kwargs.get(k)]
            if missing:
                raise HookError(
                    f"tau_user: an LLM user needs interaction_kwargs {missing} (the user simulator's endpoint)"
                )
            self.user = LLMUser(
                kwargs["instruction"],
                kwargs["base_url"],
                kwargs["model"],
                max_tokens=_number(kwargs, "max_tokens", int, None),
                timeout_s=_number(kwargs, "timeout_s", float, 120.0),
            )
        else:
            raise HookError(f"tau_user: interaction_kwargs.user must be 'scripted' or 'llm', got {kind!r}")
        self.terminate_tools = set(_strings(kwargs, "terminate_tools")) if kwargs.get("terminate_tools") else set()
        self.responses: list[str] = []
        self.ended_by = ""

    async def _user_says(self, agent_message: str | None) -> HookAction:
        text = await self.user.reply(agent_message)
        if STOP in text:
            self.ended_by = "user_stop"
            return HookAction(terminate=True)
        return HookAction(user_message=text)

    async def on_start(self, view: EpisodeView) -> HookAction | None:
        return await self._user_says(None)

    async def on_tool_round_end(self, view: EpisodeView, records) -> HookAction | None:
        if any(ends_episode(r, self.terminate_tools) for r in records):
            self.ended_by = "terminate_tool"
            return HookAction(terminate=True)
        return None

    async def on_assistant_end(self, view: EpisodeView, content: str) -> HookAction | None:
        self.responses.append(content)
        return await self._user_says(content)

    async def on_end(self, view: EpisodeView) -> dict[str, Any]:
        await self.user.aclose()
        listed = len(self.user.script) - 1 if isinstance(self.user, ScriptedUser) else None  # an LLM user: open-ended
        counts = user_turn_counts(listed)
        return {"responses": self.responses, **counts, "ended_by": self.ended_by or "loop"}
