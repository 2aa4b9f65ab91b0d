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
Interactions written for verl <= 0.7 (`BaseInteraction`) run through the adapter in
`astra_verl.rollout.verl_interaction` once their base-class import names that module (verl 0.9.1
has no `verl.interactions`), configured by `astra.rollout.interaction_config_path`;
`astra_verl.rollout.episode_hook.create_hook` picks an episode's hook among both.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

from astra_foundation.strict import StrictModel
from astra_verl.calls.call_log import EpisodeLog
from env_registry.episode_driver import HookAction, SilentHook
from env_registry.llm_user import RoleSwappedChat, missing_value_prompt
from env_registry.rows import ToolRef
from env_registry.spec import EnvSpec
from env_registry.variants import LLM_USER_HOOK, OTHERWISE, UserScript


class HookError(ValueError):
    """A hook is unknown or misconfigured for a row."""


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


class EnvironmentHook(SilentHook):
    """Base hook: single user turn, nothing injected (every callback is `SilentHook`'s no-op;
    the module docstring says what each may return)."""

    name: ClassVar[str] = ""

    def __init__(self, kwargs: dict[str, Any]):
        self.kwargs = kwargs

    def tool_pool(self) -> list[ToolRef]:
        return []


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


# -- user turns ------------------------------------------------------------------------------
# Hook-state key of how many user turns a row lists (absent for an open-ended user). How many
# were delivered is one counter, the episode driver's `EpisodeLog.user_turns`, not a hook's.
TURNS_LISTED = "user_turns_listed"


class UserTurn(StrictModel):
    """One user turn a hook delivers after the prompt's (`interaction_kwargs.turns`).

    Counting convention, for every hook (`scripted_user_turns`, `bfcl_multi_turn`, `tau_user`):
    user turns are counted **after the prompt's**: the prompt's own user turn (if it has one) is
    never a `UserTurn` and is never counted. The delivered count is the episode driver's
    `EpisodeLog.user_turns` (the user messages that entered the conversation; a hook's own
    count could differ: a message past `max_user_turns` is never appended). A benchmark that
    counts the prompt's turn (BFCL's ground truth has one entry per user turn) adds it where it scores.

    Wire format (`parse_user_turns`): a string (the content), or {"content": str | null,
    "add_tools": [tool, ...]} where a tool is {"env_id": str, "name": str}, or a bare name of a
    tool of the row's environment (`interaction_kwargs.env_id`). `content` is null when the hook
    words the message itself (BFCL's hold-out turn).
    """

    section = "interaction_kwargs.turns"

    content: str | None = None
    add_tools: tuple[ToolRef, ...] = ()


def user_turn_counts(listed: int | None) -> dict[str, int]:
    """A hook's final-state entry for the user turns its row lists (see `UserTurn` for what is
    counted; the delivered ones are `EpisodeLog.user_turns`)."""
    return {} if listed is None else {TURNS_LISTED: listed}


def parse_user_turns(raw: Any, hook: str, env_id: str | None = None, key: str = "turns") -> list[UserTurn]:
    """`interaction_kwargs[key]` (a list, or its JSON text: parquet-friendly) as `UserTurn`s;
    bare tool names are tools of `env_id`. HookError names the hook and the turn."""
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise HookError(f"{hook}: interaction_kwargs.{key} is not JSON ({exc})") from exc
    if raw is None:
        raise HookError(f"{hook}: interaction_kwargs.{key} is missing")
    if hasattr(raw, "tolist"):  # numpy arrays out of parquet
        raw = raw.tolist()
    if not isinstance(raw, list | tuple):
        raise HookError(f"{hook}: interaction_kwargs.{key} must be a list, got {type(raw).__name__}")
    return [_user_turn(t, f"{hook}: {key}[{i}]", env_id) for i, t in enumerate(raw)]


def _user_turn(raw: Any, where: str, env_id: str | None) -> UserTurn:
    if isinstance(raw, str):
        return UserTurn(content=raw)
    if not isinstance(raw, dict) or not (raw.get("content") is None or isinstance(raw.get("content"), str)):
        raise HookError(f"{where} must be a string or an object whose 'content' is a string or null")
    unknown = sorted(set(raw) - {"content", "add_tools"})
    if unknown:
        raise HookError(f"{where} has unknown keys {unknown}; a turn has 'content' and 'add_tools'")
    tools = raw.get("add_tools") or []
    if not isinstance(tools, list | tuple):
        raise HookError(f"{where}.add_tools must be a list of tools")
    refs = []
    for tool in tools:
        if isinstance(tool, str) and env_id:
            refs.append(ToolRef(env_id=env_id, name=tool))
        elif isinstance(tool, dict) and isinstance(tool.get("env_id"), str) and isinstance(tool.get("name"), str):
            refs.append(ToolRef(env_id=tool["env_id"], name=tool["name"]))
        else:
            raise HookError(
                f"{where}.add_tools entries need env_id and name, got {tool!r}"
                + ("" if env_id else " (bare names need interaction_kwargs.env_id)")
            )
    return UserTurn(content=raw.get("content"), add_tools=tuple(refs))


@register_hook("scripted_user_turns")
class ScriptedUserTurnsHook(EnvironmentHook):
    """Further user turns listed in the row, delivered one per assistant turn that ends without calls.

    interaction_kwargs: {"name": "scripted_user_turns", "turns": [turn, ...], "env_id": optional,
    "answer_ends": optional bool, "otherwise": optional str} with turns as `UserTurn` reads them,
    each with content. After the last turn is answered the episode ends.

    The user of a missing-value environment (issue 49, `env_registry.variants.interaction_kwargs`
    writes it into the row, so RL, `eval envs` and SFT run the same user): with `answer_ends`, a
    turn that holds an answer channel is the final answer and ends the episode (the user answers
    questions, not answers); `otherwise` is said once to a question asked after the listed turns
    (the user knows nothing else), and the next question ends the episode.
    Final state: `user_turn_counts` (the turns it lists after the prompt's).
    """

    def __init__(self, kwargs: dict[str, Any]):
        super().__init__(kwargs)
        self.turns = parse_user_turns(kwargs.get("turns"), "scripted_user_turns", kwargs.get("env_id"))
        for i, turn in enumerate(self.turns):
            if turn.content is None:
                raise HookError(f"scripted_user_turns: turns[{i}] has no content (this hook sends it verbatim)")
        self.answer_ends = kwargs.get("answer_ends") or False
        self.otherwise = kwargs.get("otherwise")
        if not isinstance(self.answer_ends, bool) or not (self.otherwise is None or isinstance(self.otherwise, str)):
            raise HookError(
                "scripted_user_turns: answer_ends must be true or false and otherwise a string, got "
                f"{self.answer_ends!r} and {self.otherwise!r}; re-export the rows (python -m env_registry export-parquet)"
            )
        self.script = UserScript(len(self.turns), self.otherwise, self.answer_ends)

    def tool_pool(self) -> list[ToolRef]:
        return [ref for turn in self.turns for ref in turn.add_tools]

    async def on_assistant_end(self, view: EpisodeView, content: str) -> HookAction | None:
        step = self.script.next(content)  # the rule validation replays too (env_registry.variants)
        if step is None:
            return None
        if step == OTHERWISE:
            return HookAction(user_message=self.otherwise)
        turn = self.turns[step]
        return HookAction(user_message=await self.words(turn, content), add_tools=turn.add_tools)

    async def words(self, turn: UserTurn, agent_message: str) -> str:
        """What the user says at a listed turn, in answer to `agent_message`: the row's text."""
        return turn.content or ""

    async def on_end(self, view: EpisodeView) -> dict[str, Any]:
        return user_turn_counts(len(self.turns))


# interaction_kwargs of an LLM user (env_registry.variants.interaction_kwargs writes them)
LLM_USER_KEYS = ("user_base_url", "user_model", "user_question", "user_missing", "user_value")


@register_hook(LLM_USER_HOOK)
class LLMUserTurnsHook(ScriptedUserTurnsHook):
    """A missing-value environment's user worded by an LLM (`--user-base-url/--user-model` of
    `export-parquet` and `eval envs`). WHEN it speaks is `ScriptedUserTurnsHook`'s rule
    (`UserScript`: the row's listed turns, then `otherwise` once, then the end; an answer ends
    it); WHAT it says at a listed turn is the model's reply to the conversation so far, the model
    told (`env_registry.llm_user.MISSING_VALUE_USER_PROMPT`) that it asked `user_question`, knows exactly
    `user_value` (`user_missing`) and nothing else.

    interaction_kwargs: the scripted user's, plus `LLM_USER_KEYS` (non-empty strings). One
    client per episode, opened at the first listed turn (an episode that never asks opens none)
    and closed at the end."""

    def __init__(self, kwargs: dict[str, Any]):
        super().__init__(kwargs)
        for key in LLM_USER_KEYS:
            value = kwargs.get(key)
            if not isinstance(value, str) or not value.strip():
                raise HookError(
                    f"{LLM_USER_HOOK}: interaction_kwargs.{key} must be a non-empty string, got {value!r}; "
                    "re-export the rows with `python -m env_registry export-parquet --user-base-url URL "
                    "--user-model NAME` (or run them with `eval envs --user-base-url URL --user-model NAME`)"
                )
        self.chat: RoleSwappedChat | None = None

    async def words(self, turn: UserTurn, agent_message: str) -> str:
        if self.chat is None:
            k = self.kwargs
            system = missing_value_prompt(k["user_question"], k["user_missing"], k["user_value"])
            self.chat = RoleSwappedChat(system, k["user_base_url"], k["user_model"], step="missing_value.user")
        return await self.chat.reply(agent_message)

    async def on_end(self, view: EpisodeView) -> dict[str, Any]:
        if self.chat is not None:
            await self.chat.aclose()
        return await super().on_end(view)
