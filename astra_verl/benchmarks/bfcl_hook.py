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
- Undecodable steps. BFCL decodes each step's calls with its handler; a step it cannot decode,
  or that decodes to no call, ends the user turn there (BFCL's "Proceed to next turn") and is
  not scored. The hook applies the same decoder (`bfcl_score.step_calls`, for the handler named
  by `call_style`) after each step (`on_tool_round_end`) and moves to the next user turn, or
  ends the episode after the last one. Unlike BFCL, our runner has already run the step's
  well-formed calls and shown the model their results and the parse errors: later observations
  of that episode can differ from BFCL's; the verdict's input does not (the checker re-executes
  decoded calls only).
- Step limit. BFCL counts the steps of a turn that decoded into calls and, after the step that
  makes the count exceed `MAXIMUM_STEP_LIMIT` (20), force-quits the whole entry. The hook
  counts the same steps and ends the episode after that step (`terminate`); the scorer then
  applies BFCL's force-termination rule.

interaction_kwargs (written by `env_registry.families.bfcl.interaction_kwargs`):
    name: bfcl_multi_turn
    env_id: the row's environment (the held-back tools are its tools)
    bfcl_id: the BFCL entry id (for logs)
    turns: JSON list of `UserTurn`s (astra_verl.rollout.hooks), one per user turn after the
           prompt's: {"content": str | null, "add_tools": [tool names]}; content is null exactly
           on a hold-out turn
    list_added_tools: true (default) | false
    call_style: prompt (default: calls parsed from the text, astra_tool_agent; BFCL's Qwen FC
           handler) | fc (OpenAI function calling, the eval chat rollout; BFCL's OpenAI handler)
    max_steps_per_turn: default BFCL's MAXIMUM_STEP_LIMIT

Final state (`on_end`, stored in `EpisodeLog.hook_state`, read by the scorer): the user-turn
count the row lists (`user_turn_counts`: turns after the prompt's, the convention of every hook;
the delivered ones are `EpisodeLog.user_turns`, and the scorer adds the prompt's, as BFCL counts it), turn_starts (the assistant-turn number at which each user
turn began, 1-based, the prompt's first), steps_per_turn (the prompt's turn first), force_quit,
call_style.
"""

from __future__ import annotations

import json
from typing import Any

from astra_verl.benchmarks.bfcl_score import CallStyle, step_calls
from astra_verl.calls.call_log import CallRecord
from astra_verl.rollout.hooks import (
    EnvironmentHook,
    EpisodeView,
    HookAction,
    HookError,
    UserTurn,
    parse_user_turns,
    register_hook,
    user_turn_counts,
)
from env_registry.families.bfcl_package import bfcl_module
from env_registry.rows import ToolRef

HOOK_NAME = "bfcl_multi_turn"
BFCL_PARSER = "astra_bfcl_qwen"  # call_parsing.BfclQwenCalls, registered by astra_verl.rollout.tool_parser


def bfcl_prompts() -> Any:
    # Lazy: bfcl-eval is optional (installed apart, --no-deps) and writes directories on import,
    # under the root bfcl_package sets first.
    return bfcl_module("bfcl_eval.constants.default_prompts")


def parse_turns(raw: Any, env_id: str) -> list[UserTurn]:
    """The row's turns (`UserTurn`s, tools by name) with BFCL's rule: a turn has either content
    (a user turn) or held-back tools (a hold-out turn, which carries no user message)."""
    turns = parse_user_turns(raw, HOOK_NAME, env_id)
    for i, turn in enumerate(turns):
        if (turn.content is None) != bool(turn.add_tools):
            raise HookError(
                f"{HOOK_NAME}: turns[{i}] must have either content (a user turn) or add_tools (a hold-out turn), "
                "as BFCL's hold-out turns carry no user message"
            )
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
        self.turns = parse_turns(kwargs.get("turns"), self.env_id)
        self.list_added_tools = bool(kwargs.get("list_added_tools", True))
        style = kwargs.get("call_style", CallStyle.PROMPT.value)
        try:
            self.call_style = CallStyle(style)
        except ValueError:
            raise HookError(
                f"{HOOK_NAME}: interaction_kwargs.call_style is {style!r}; use one of {[s.value for s in CallStyle]}"
            ) from None
        limit = kwargs.get("max_steps_per_turn")
        self.max_steps = int(limit) if limit is not None else int(bfcl_prompts().MAXIMUM_STEP_LIMIT)
        self.current = 0  # index of the user turn in progress (0: the prompt's)
        self.turn_starts = [1]
        self.steps = [0]
        self.force_quit = False

    def tool_pool(self) -> list[ToolRef]:
        return [ref for turn in self.turns for ref in turn.add_tools]

    async def on_start(self, view: EpisodeView) -> HookAction | None:
        if self.call_style is CallStyle.PROMPT and view.log.parser != BFCL_PARSER:
            raise HookError(
                f"{HOOK_NAME}: prompt-style BFCL episodes must be read by BFCL's decoder, the tool parser "
                f"{BFCL_PARSER!r}, not {view.log.parser!r}: set astra.rollout.tool_parser={BFCL_PARSER} "
                "(recipe astra_bfcl_eval does)"
            )
        return None

    async def on_tool_round_end(self, view: EpisodeView, records: list[CallRecord]) -> HookAction | None:
        if self.force_quit:
            return None
        if step_calls(records, self.call_style) is None:  # BFCL's handler drops the step: the turn ends
            return self._next_turn(view) or HookAction(terminate=True)
        self.steps[-1] += 1
        if self.steps[-1] > self.max_steps:
            self.force_quit = True
            return HookAction(terminate=True)
        return None

    async def on_assistant_end(self, view: EpisodeView, content: str) -> HookAction | None:
        return self._next_turn(view)

    def _next_turn(self, view: EpisodeView) -> HookAction | None:
        """The next user turn (None after the last one, or once force-quit)."""
        if self.force_quit or self.current >= len(self.turns):
            return None
        turn = self.turns[self.current]
        self.current += 1
        self.turn_starts.append(view.log.assistant_turns + 1)
        self.steps.append(0)
        refs = turn.add_tools
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
            **user_turn_counts(len(self.turns)),
            "turn_starts": list(self.turn_starts),
            "steps_per_turn": list(self.steps),
            "force_quit": self.force_quit,
            "call_style": self.call_style.value,
        }
