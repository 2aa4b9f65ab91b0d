"""The environment-interaction hook: what an environment may do during an episode.

`astra_tool_agent` calls the row's hook at five points:

    on_start(view)                   before the first generation (may add a user message / tools)
    on_tool_result(view, record)     after each executed (or rejected) tool call
    on_tool_round_end(view, records) after all calls of one assistant turn (its records, in order),
                                     before the next generation
    on_assistant_end(view, content)  the assistant ended a turn without tool calls; returning a
                                     `HookAction` with a `user_message` continues the episode
                                     (multi-user-turn tasks), `None` ends it
    on_end(view) -> dict             final environment state, stored in the episode log
                                     (`EpisodeLog.hook_state`) for the reward

Any callback may return a `HookAction`: deliver a user message (tokens with mask 0), make tools
available (`add_tools`; BFCL's miss_func), end the episode, or report a turn score. Tools a
hook may add later must be declared up front in `tool_pool()`: their code is loaded into the
episode's sandbox session at the start (hidden), because a session's program is fixed and a
new session would lose the episode's state. Calling a tool before it is added is an
`unknown_tool` call, as for any tool the model was not shown.

A hook instance serves one episode (fresh state per rollout). The row picks it by
`extra_info.interaction_kwargs.name` (default: `astra.rollout.default_hook`); the rest of
`interaction_kwargs` is the hook's configuration. Register new hooks with `@register_hook`.
Interactions written for verl <= 0.7 (`BaseInteraction`) run unchanged through the adapter in
`astra_verl.rollout.verl_interaction`, configured by `astra.rollout.interaction_config_path`;
`astra_verl.rollout.episode_hook.create_hook` picks an episode's hook among both.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from astra_verl.calls.call_log import CallRecord, EpisodeLog
from env_registry.rows import ToolRef
from env_registry.spec import EnvSpec


class HookError(ValueError):
    """A hook is unknown or misconfigured for a row."""


@dataclass(frozen=True)
class HookAction:
    user_message: str | None = None  # appended as a user turn (mask 0)
    add_tools: tuple[ToolRef, ...] = ()  # tools from `tool_pool()` that become callable now
    terminate: bool = False  # end the episode (termination reason `hook`)
    turn_score: float | None = None  # appended to extra_fields["turn_scores"]


class EpisodeView(Protocol):
    """What a hook may read about the running episode (the loop implements it)."""

    request_id: str
    env: EnvSpec
    log: EpisodeLog

    @property
    def messages(self) -> list[dict[str, Any]]: ...

    @property
    def shown_tools(self) -> list[str]: ...

    def tool_schemas(self, refs: list[ToolRef] | tuple[ToolRef, ...]) -> list[dict[str, Any]]:
        """OpenAI schemas of tools (e.g. to describe tools a hook is adding)."""
        ...


class EnvironmentHook:
    """Base hook: single user turn, nothing injected (every callback is a no-op)."""

    name: ClassVar[str] = ""

    def __init__(self, kwargs: dict[str, Any]):
        self.kwargs = kwargs

    def tool_pool(self) -> list[ToolRef]:
        return []

    async def on_start(self, view: EpisodeView) -> HookAction | None:
        return None

    async def on_tool_result(self, view: EpisodeView, record: CallRecord) -> HookAction | None:
        return None

    async def on_tool_round_end(self, view: EpisodeView, records: list[CallRecord]) -> HookAction | None:
        return None

    async def on_assistant_end(self, view: EpisodeView, content: str) -> HookAction | None:
        return None

    async def on_end(self, view: EpisodeView) -> dict[str, Any]:
        return {}


HookFactory = Callable[[dict[str, Any]], EnvironmentHook]
_HOOKS: dict[str, HookFactory] = {}


def register_hook(name: str):
    """Class decorator: make a hook selectable by `interaction_kwargs.name == name`."""

    def decorator(cls: type[EnvironmentHook]) -> type[EnvironmentHook]:
        if name in _HOOKS and _HOOKS[name] is not cls:
            raise HookError(f"a hook named {name!r} is already registered ({_HOOKS[name]})")
        cls.name = name
        _HOOKS[name] = cls
        return cls

    return decorator


def registered_hooks() -> list[str]:
    return sorted(_HOOKS)


def hook_factory(name: str) -> HookFactory | None:
    """The registered hook class named `name`, or None."""
    return _HOOKS.get(name)


@register_hook("astra_default")
class AstraDefaultHook(EnvironmentHook):
    """ASTRA's RL episodes: the single user question of the prompt, nothing else."""


@dataclass(frozen=True)
class ScriptedTurn:
    content: str
    add_tools: tuple[ToolRef, ...] = ()


@register_hook("scripted_user_turns")
class ScriptedUserTurnsHook(EnvironmentHook):
    """Further user turns listed in the row, delivered one per assistant turn that ends without calls.

    interaction_kwargs: {"name": "scripted_user_turns", "turns": [turn, ...]} where a turn is a
    string or {"content": str, "add_tools": [{"env_id": str, "name": str}, ...]}; `turns` may
    also be a JSON string of that list (parquet-friendly). After the last turn is answered the
    episode ends. Final state: how many turns were delivered.
    """

    def __init__(self, kwargs: dict[str, Any]):
        super().__init__(kwargs)
        self.turns = _parse_turns(kwargs.get("turns"))
        self.delivered = 0

    def tool_pool(self) -> list[ToolRef]:
        return [ref for turn in self.turns for ref in turn.add_tools]

    async def on_assistant_end(self, view: EpisodeView, content: str) -> HookAction | None:
        if self.delivered >= len(self.turns):
            return None
        turn = self.turns[self.delivered]
        self.delivered += 1
        return HookAction(user_message=turn.content, add_tools=turn.add_tools)

    async def on_end(self, view: EpisodeView) -> dict[str, Any]:
        return {"turns_delivered": self.delivered, "turns_total": len(self.turns)}


def _parse_turns(raw: Any) -> list[ScriptedTurn]:
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise HookError(f"scripted_user_turns: interaction_kwargs.turns is not JSON ({exc})") from exc
    if raw is None:
        raise HookError("scripted_user_turns: interaction_kwargs.turns is missing")
    if hasattr(raw, "tolist"):  # numpy arrays out of parquet
        raw = raw.tolist()
    if not isinstance(raw, list | tuple):
        raise HookError(f"scripted_user_turns: interaction_kwargs.turns must be a list, got {type(raw).__name__}")
    turns = []
    for i, t in enumerate(raw):
        if isinstance(t, str):
            turns.append(ScriptedTurn(content=t))
            continue
        if not isinstance(t, dict) or not isinstance(t.get("content"), str):
            raise HookError(f"scripted_user_turns: turns[{i}] must be a string or an object with a 'content' string")
        try:
            refs = tuple(ToolRef(env_id=r["env_id"], name=r["name"]) for r in (t.get("add_tools") or []))
        except (KeyError, TypeError) as exc:
            raise HookError(f"scripted_user_turns: turns[{i}].add_tools entries need env_id and name ({exc})") from exc
        turns.append(ScriptedTurn(content=t["content"], add_tools=refs))
    return turns
