"""The `bfcl_multi_turn` environment hook: BFCL's multi-turn inference loop, turn by turn.

What BFCL's loop does (bfcl_eval.model_handler.base_handler, `inference_multi_turn_*`), and how
this hook reproduces it inside `astra_tool_agent` (or the chat runner of `astra_verl.eval`):

- Turns. The prompt holds the first user turn; each time the model ends a step without a tool
  call, the turn is over and the hook delivers the next user turn (`on_assistant_end`). After
  the last turn the episode ends.
- Hold-out turns (miss_func). At the turn BFCL names, the held-back functions become callable
  (`add_tools`; they are loaded hidden from the start: `tool_pool()`), and the user message is
  BFCL's: in prompting mode (how BFCL runs open models such as Qwen3-FC, whose tool list sits in
  the system prompt and cannot change) the new functions are listed before "I have updated some
  more functions you can choose from. What about now?"; with `list_added_tools: false` (OpenAI
  function calling, where the request's tool list grows) only that sentence is sent.
- Step limit. BFCL counts the steps of a turn that produced decodable calls and, after the step
  that makes the count exceed `MAXIMUM_STEP_LIMIT` (20), force-quits the whole entry. The hook
  counts the same way (a step counts at its first call that is not malformed JSON: BFCL's
  decoder drops those) and ends the episode after that step (`terminate`); the scorer then
  applies BFCL's force-termination rule.

interaction_kwargs (written by `env_registry.families.bfcl.interaction_kwargs`):
    name: bfcl_multi_turn
    env_id: the row's environment (the held-back tools are its tools)
    bfcl_id: the BFCL entry id (for logs)
    turns: JSON list, one item per user turn after the first: {"content": str | null,
           "add_tools": [tool names]}; content is null exactly on a hold-out turn
    list_added_tools: true (default) | false
    max_steps_per_turn: default BFCL's MAXIMUM_STEP_LIMIT

Final state (`on_end`, stored in `EpisodeLog.hook_state`, read by the scorer): turns_total,
turns_delivered, turn_starts (the assistant-turn number at which each delivered user turn
began, 1-based), steps_per_turn, force_quit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from astra_verl.rollout.call_log import CallRecord, CallStatus
from astra_verl.rollout.hooks import EnvironmentHook, EpisodeView, HookAction, HookError, register_hook
from env_registry.rows import ToolRef

HOOK_NAME = "bfcl_multi_turn"


def bfcl_prompts() -> Any:
    # Lazy: bfcl-eval is optional (installed apart, --no-deps) and writes directories on import.
    from bfcl_eval.constants import default_prompts

    return default_prompts


@dataclass(frozen=True)
class BfclTurn:
    content: str | None
    add_tools: tuple[str, ...] = ()


def parse_turns(raw: Any) -> list[BfclTurn]:
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise HookError(f"{HOOK_NAME}: interaction_kwargs.turns is not JSON ({exc})") from exc
    if not isinstance(raw, list):
        raise HookError(f"{HOOK_NAME}: interaction_kwargs.turns must be a JSON list, got {type(raw).__name__}")
    turns = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict):
            raise HookError(f"{HOOK_NAME}: turns[{i}] must be an object with content and add_tools")
        content, add = t.get("content"), t.get("add_tools") or []
        if content is not None and not isinstance(content, str):
            raise HookError(f"{HOOK_NAME}: turns[{i}].content must be a string or null")
        if not isinstance(add, list) or not all(isinstance(n, str) for n in add):
            raise HookError(f"{HOOK_NAME}: turns[{i}].add_tools must be a list of tool names")
        if (content is None) != bool(add):
            raise HookError(
                f"{HOOK_NAME}: turns[{i}] must have either content (a user turn) or add_tools (a hold-out turn), "
                "as BFCL's hold-out turns carry no user message"
            )
        turns.append(BfclTurn(content=content, add_tools=tuple(add)))
    return turns


@register_hook(HOOK_NAME)
class BfclMultiTurnHook(EnvironmentHook):
    """See the module docstring. One instance serves one episode."""

    def __init__(self, kwargs: dict[str, Any]):
        super().__init__(kwargs)
        self.env_id = kwargs.get("env_id")
        if not isinstance(self.env_id, str) or not self.env_id:
            raise HookError(f"{HOOK_NAME}: interaction_kwargs.env_id is missing (re-export the BFCL rows)")
        self.bfcl_id = kwargs.get("bfcl_id")
        self.turns = parse_turns(kwargs.get("turns"))
        self.list_added_tools = bool(kwargs.get("list_added_tools", True))
        limit = kwargs.get("max_steps_per_turn")
        self.max_steps = int(limit) if limit is not None else int(bfcl_prompts().MAXIMUM_STEP_LIMIT)
        self.current = 0  # index of the user turn in progress (0: the prompt's)
        self.turn_starts = [1]
        self.steps = [0]
        self._last_step: int | None = None
        self.force_quit = False

    def _refs(self, turn: BfclTurn) -> tuple[ToolRef, ...]:
        return tuple(ToolRef(env_id=self.env_id, name=n) for n in turn.add_tools)

    def tool_pool(self) -> list[ToolRef]:
        return [ref for turn in self.turns for ref in self._refs(turn)]

    async def on_tool_result(self, view: EpisodeView, record: CallRecord) -> HookAction | None:
        if record.status is CallStatus.BAD_JSON or record.turn == self._last_step:
            return None
        self._last_step = record.turn
        self.steps[-1] += 1
        if self.steps[-1] > self.max_steps and not self.force_quit:
            self.force_quit = True
            return HookAction(terminate=True)
        return None

    async def on_assistant_end(self, view: EpisodeView, content: str) -> HookAction | None:
        if self.force_quit or self.current >= len(self.turns):
            return None
        turn = self.turns[self.current]
        self.current += 1
        self.turn_starts.append(view.log.assistant_turns + 1)
        self.steps.append(0)
        refs = self._refs(turn)
        return HookAction(user_message=turn.content or self._holdout_message(view, refs), add_tools=refs)

    def _holdout_message(self, view: EpisodeView, refs: tuple[ToolRef, ...]) -> str:
        prompts = bfcl_prompts()
        if not self.list_added_tools:
            return prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
        functions = [schema.get("function", schema) for schema in view.tool_schemas(refs)]
        return prompts.DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_PROMPTING.format(functions=json.dumps(functions))

    async def on_end(self, view: EpisodeView) -> dict[str, Any]:
        return {
            "bfcl_id": self.bfcl_id,
            "turns_total": 1 + len(self.turns),
            "turns_delivered": 1 + self.current,
            "turn_starts": list(self.turn_starts),
            "steps_per_turn": list(self.steps),
            "force_quit": self.force_quit,
        }
