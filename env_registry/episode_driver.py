"""One episode of a model calling tools: its rules, written once for every loop that runs one.

Three loops let a model call tools: RL's `astra_tool_agent` (token ids inside verl), the chat
rollout of the evaluation (`eval bfcl`, `bfcl-replay`, messages against a served model) and
trajectory synthesis (`data_synth traj`, whose episodes become SFT data). They differ in
transport only: how a turn is generated, how a call runs, how a message enters the model's
context. What an episode *is* lives here, so a model meets the same episode in SFT data, in RL
and in evaluation: where a user message goes, what ends the episode, every cap, what is logged.

A small gymnasium-style interface, no I/O of its own (the caller's `Transport` does it):

    driver = EpisodeDriver(episode, transport, limits, hook)
    await driver.reset()                       # the hook's on_start; may end the episode
    while not driver.done:
        turn = ...generate one assistant turn...  # the caller's transport
        await driver.step(turn)                # the turn, its calls, user turns, termination
    await driver.close()                       # the hook's final state into the log

States (an explicit machine with one handler each, as in verl's `ToolAgentLoop`):

    step(turn) ──(calls)──> TOOL_ROUND ──> next step
         └──(no calls)──> INTERACTING ──(the hook gives a user turn)──> next step
                                └──(otherwise)──> TERMINATED

- A turn is appended to the transcript as one assistant message listing **every** call attempt,
  malformed ones included, each with an id `call_<n>` (n counts attempts over the episode,
  whatever ids the model wrote); each attempt gets exactly one tool message answering its id.
- A turn that spends the transport's response budget (`AssistantTurn.at_limit`) ends the
  episode (`max_length`) after it is parsed: without calls its content is the final answer.
- A turn with calls at `max_assistant_turns` ends the episode (`max_turns`) unexecuted. Calls
  past `max_parallel_calls` in one turn are answered "Not executed" and logged `skipped`.
- User messages a hook gives during a tool round wait until every tool message of the round is
  in; every user message counts once in `log.user_turns` (the prompt's and the hook's opening
  message, `on_start`, are the prompt's turn and do not count), and none is appended past
  `max_user_turns`: a user turn the cap refuses ends the episode (`max_turns`).
- `Transport.admit` puts the new messages into the model's context; False (they overflow the
  response budget) ends the episode (`max_length`). `Transport.settle` may end an episode whose
  sub-questions are all solved (`all_solved`) or allow one last turn for the final answer.

Termination reasons: `no_tool_call`, `max_turns`, `max_length`, `all_solved`, `hook`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from pydantic import Field

from astra_foundation.strict import StrictModel
from env_registry.call_gate import CallStatus, openai_arguments
from env_registry.rows import ToolRef

__all__ = [
    "AssistantTurn",
    "CallResult",
    "EpisodeCounts",
    "EpisodeDriver",
    "EpisodeHook",
    "EpisodeLimits",
    "HookAction",
    "ParsedCall",
    "Settled",
    "SilentHook",
    "Termination",
    "not_executed",
]


class Termination(str, Enum):
    NO_TOOL_CALL = "no_tool_call"  # the assistant ended a turn without calls (its final answer)
    MAX_TURNS = "max_turns"  # max_assistant_turns, or a user turn past max_user_turns
    MAX_LENGTH = "max_length"  # the transport's response budget
    ALL_SOLVED = "all_solved"
    HOOK = "hook"  # the environment-interaction hook ended the episode


class State(Enum):
    TOOL_ROUND = "tool_round"
    INTERACTING = "interacting"
    TERMINATED = "terminated"


class Settled(Enum):
    """What a transport's `settle` says after a tool round (RL's `stop_when_all_solved`)."""

    GO_ON = "go_on"
    END = "end"  # every sub-question is solved: the episode ends `all_solved`
    ANSWER_TURN = "answer_turn"  # one more turn, for the final answer only


class EpisodeLimits(StrictModel):
    """The caps of an episode (None: no cap). RL reads them from verl's `multi_turn` keys and
    `astra.rollout.max_user_turns`; the chat rollout and synthesis take them as arguments."""

    section = "episode limits"

    max_assistant_turns: int | None = Field(default=None, ge=1)
    max_user_turns: int | None = Field(default=None, ge=0)  # user messages after the prompt's turn
    max_parallel_calls: int | None = Field(default=None, ge=1)  # calls run per assistant turn


@dataclass(frozen=True)
class ParsedCall:
    """One call attempt. `arguments` is the decoded object, or None when the attempt is malformed."""

    name: str | None
    arguments: dict[str, Any] | None
    raw: str  # what the model wrote for it (a call block, or an argument string)
    error_kind: str | None = None  # None for a well-formed call
    error: str = ""  # model-readable explanation when malformed

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @classmethod
    def from_openai(cls, call: Any) -> ParsedCall:
        """The attempt an OpenAI tool call (`astra_foundation.llm.ToolCall`) is: malformed unless its
        argument string is a JSON object (`env_registry.call_gate.openai_arguments`)."""
        args, error = openai_arguments(call)
        return cls(
            name=call.name,
            arguments=args,
            raw=call.arguments,
            error_kind=None if args is not None else CallStatus.BAD_JSON.value,
            error=error,
        )

    def arguments_text(self) -> str:
        """The arguments as the transcript shows them: the decoded object re-encoded (one spelling
        whichever decoder read it), else as written; an object nested past the encoder's depth is
        shown as written too (it decoded, so it is valid JSON there)."""
        if self.arguments is None:
            return self.raw
        try:
            return json.dumps(self.arguments, ensure_ascii=False)
        except RecursionError:
            return self.raw


@dataclass(frozen=True)
class AssistantTurn:
    """One generated turn as the driver reads it, whatever decoded it."""

    content: str
    calls: tuple[ParsedCall, ...] = ()
    at_limit: bool = False  # the transport's response budget is spent with this turn


@dataclass(frozen=True)
class HookAction:
    """What an environment hook may do at any point of the episode (None: nothing)."""

    user_message: str | None = None  # appended as a user turn (mask 0 in RL)
    add_tools: tuple[ToolRef, ...] = ()  # tools from the hook's `tool_pool()` that become callable now
    terminate: bool = False  # end the episode (termination reason `hook`)
    turn_score: float | None = None  # appended to the driver's `turn_scores`


@dataclass
class CallResult:
    """A transport's answer to one attempt: its status, the tool message's text, its own log record."""

    status: CallStatus
    text: str
    record: Any  # appended to `log.calls` (RL: `CallRecord`; synthesis: `TrajectoryCall`)


class Transport(Protocol):
    """What the driver needs of a loop's transport (see the module docstring)."""

    async def run_call(self, turn: int, index: int, call_id: str, call: ParsedCall) -> CallResult: ...

    def skipped(self, turn: int, index: int, call_id: str, call: ParsedCall, text: str) -> CallResult: ...

    async def admit(self, previous: list[dict[str, Any]], records: list[Any]) -> bool: ...

    async def settle(self, records: list[Any]) -> Settled: ...


class EpisodeHook(Protocol):
    """The environment-interaction hook's five points (astra_verl.rollout.hooks documents them)."""

    async def on_start(self, view: Any) -> HookAction | None: ...

    async def on_tool_result(self, view: Any, record: Any) -> HookAction | None: ...

    async def on_tool_round_end(self, view: Any, records: list[Any]) -> HookAction | None: ...

    async def on_assistant_end(self, view: Any, content: str) -> HookAction | None: ...

    async def on_end(self, view: Any) -> dict[str, Any]: ...


class SilentHook:
    """No environment interaction: one user turn, nothing injected (trajectory synthesis; the
    base of RL's environment hooks, `astra_verl.rollout.hooks.EnvironmentHook`)."""

    async def on_start(self, view: Any) -> HookAction | None:
        return None

    async def on_tool_result(self, view: Any, record: Any) -> HookAction | None:
        return None

    async def on_tool_round_end(self, view: Any, records: list[Any]) -> HookAction | None:
        return None

    async def on_assistant_end(self, view: Any, content: str) -> HookAction | None:
        return None

    async def on_end(self, view: Any) -> dict[str, Any]:
        return {}


@dataclass
class EpisodeCounts:
    """The log the driver writes, for a caller without a record of its own (RL's `EpisodeLog` has these fields)."""

    calls: list[Any] = field(default_factory=list)
    assistant_turns: int = 0
    user_turns: int = 0
    final_answer: str = ""
    terminated_by: Termination | None = None
    hook_state: dict[str, Any] = field(default_factory=dict)


class DrivenEpisode(Protocol):
    """The episode the driver runs: its transcript, its log, and the tools hooks may reveal."""

    messages: list[dict[str, Any]]
    log: Any  # assistant_turns, user_turns, final_answer, terminated_by, calls, hook_state

    def reveal(self, refs: Iterable[ToolRef]) -> None: ...


def not_executed(cap: int) -> str:
    """The tool message of a call past `max_parallel_calls` (one wording for every loop)."""
    return f"Not executed: at most {cap} tool calls are run per turn."


def assistant_message(content: str, calls: Sequence[tuple[str, ParsedCall]]) -> dict[str, Any]:
    """An assistant turn in OpenAI's format, every attempt listed under its id."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": c.name or "", "arguments": c.arguments_text()}}
            for cid, c in calls
        ]
    return message


def tool_message(call_id: str, call: ParsedCall, text: str) -> dict[str, Any]:
    message = {"role": "tool", "tool_call_id": call_id, "content": text}
    if call.name:
        message["name"] = call.name
    return message


class EpisodeDriver:
    """Runs one episode's rules over `episode` (the hooks' view) through `transport`; see the module docstring."""

    def __init__(self, episode: DrivenEpisode, transport: Transport, limits: EpisodeLimits, hook: EpisodeHook):
        self.episode = episode
        self.transport = transport
        self.limits = limits
        self.hook = hook
        self.turn_scores: list[float] = []
        self.attempts = 0  # call attempts so far: the next one's id is call_<attempts>
        self.answer_turn = False  # the next turn is for the final answer only (Settled.ANSWER_TURN)
        self.call_ids: list[str] = []  # the ids of the current turn's attempts

    @property
    def log(self) -> Any:
        return self.episode.log

    @property
    def done(self) -> bool:
        return self.log.terminated_by is not None

    # -- the interface ---------------------------------------------------------------------
    async def reset(self) -> None:
        """The hook's opening: its user message is the prompt's turn (not counted)."""
        action = self._take(await self.hook.on_start(self.episode))
        if action.user_message:
            self.episode.messages.append({"role": "user", "content": action.user_message})
        if action.terminate:
            self._end(Termination.HOOK)

    async def step(self, turn: AssistantTurn) -> bool:
        """Apply one assistant turn; True once the episode has ended."""
        if self.done:
            raise RuntimeError(f"episode driver: step() after the episode ended ({self.log.terminated_by.value})")
        state = self._on_turn(turn)
        if state is State.TOOL_ROUND:
            await self._tool_round(turn)
        elif state is State.INTERACTING:
            await self._interact(turn.content)
        return self.done

    async def close(self) -> dict[str, Any]:
        """The hook's final state, stored in the log."""
        self.log.hook_state = await self.hook.on_end(self.episode)
        return self.log.hook_state

    # -- the handlers ----------------------------------------------------------------------
    def _on_turn(self, turn: AssistantTurn) -> State:
        """Log and transcribe the turn; where the episode goes next."""
        self.log.assistant_turns += 1
        ids = [f"call_{self.attempts + i}" for i in range(len(turn.calls))]
        self.attempts += len(turn.calls)
        self.episode.messages.append(assistant_message(turn.content, list(zip(ids, turn.calls, strict=True))))
        self.call_ids = ids
        answer_turn, self.answer_turn = self.answer_turn, False
        if not turn.calls:
            self.log.final_answer = turn.content
            return self._end(Termination.MAX_LENGTH) if turn.at_limit else State.INTERACTING
        if turn.at_limit:
            return self._end(Termination.MAX_LENGTH)
        if answer_turn:
            return self._end(Termination.ALL_SOLVED)  # the answer turn's calls are not run
        if self._capped(self.log.assistant_turns, self.limits.max_assistant_turns):
            return self._end(Termination.MAX_TURNS)
        return State.TOOL_ROUND

    async def _tool_round(self, turn: AssistantTurn) -> None:
        previous = list(self.episode.messages)
        pending: list[str] = []
        terminate = False
        records: list[Any] = []
        for index, (call_id, call) in enumerate(zip(self.call_ids, turn.calls, strict=True)):
            result = await self._call(index, call_id, call)
            records.append(result.record)
            self.log.calls.append(result.record)
            self.episode.messages.append(tool_message(call_id, call, result.text))
            if result.status is not CallStatus.SKIPPED:
                terminate |= self._midround(await self.hook.on_tool_result(self.episode, result.record), pending)
        terminate |= self._midround(await self.hook.on_tool_round_end(self.episode, records), pending)
        refused = not all(self._deliver(content) for content in pending)
        if not await self.transport.admit(previous, records):
            self._end(Termination.MAX_LENGTH)
            return
        settled = await self.transport.settle(records)
        if terminate:
            self._end(Termination.HOOK)
        elif refused:
            self._end(Termination.MAX_TURNS)
        elif settled is Settled.END:
            self._end(Termination.ALL_SOLVED)
        elif settled is Settled.ANSWER_TURN:
            self.answer_turn = True

    async def _call(self, index: int, call_id: str, call: ParsedCall) -> CallResult:
        turn = self.log.assistant_turns
        cap = self.limits.max_parallel_calls
        if cap is not None and index >= cap:
            return self.transport.skipped(turn, index, call_id, call, not_executed(cap))
        return await self.transport.run_call(turn, index, call_id, call)

    async def _interact(self, content: str) -> None:
        action = await self.hook.on_assistant_end(self.episode, content)
        if action is None:
            self._end(Termination.NO_TOOL_CALL)
            return
        self._take(action)
        if not action.terminate and not action.user_message:
            self._end(Termination.NO_TOOL_CALL)
            return
        if not action.terminate and self._capped(self.log.assistant_turns, self.limits.max_assistant_turns):
            self._end(Termination.MAX_TURNS)  # no turn is left to answer the user
            return
        if action.user_message:
            previous = list(self.episode.messages)
            if not self._deliver(action.user_message):
                self._end(Termination.HOOK if action.terminate else Termination.MAX_TURNS)
                return
            if not await self.transport.admit(previous, []):
                self._end(Termination.MAX_LENGTH)
                return
        if action.terminate:
            self._end(Termination.HOOK)

    # -- shared pieces ---------------------------------------------------------------------
    def _take(self, action: HookAction | None) -> HookAction:
        """What a hook action does wherever it comes: its tools become callable, its turn score is
        kept. Where its user message goes and what `terminate` ends depend on the point of the
        episode, so the handlers decide those. None (nothing to say) is an empty action."""
        if action is None:
            return HookAction()
        self.episode.reveal(action.add_tools)
        if action.turn_score is not None:
            self.turn_scores.append(action.turn_score)
        return action

    def _midround(self, action: HookAction | None, pending: list[str]) -> bool:
        action = self._take(action)
        if action.user_message:
            pending.append(action.user_message)  # after the round's tool messages
        return action.terminate

    def _deliver(self, content: str) -> bool:
        """Append a user message unless `max_user_turns` is reached; False when the cap refused it."""
        if self._capped(self.log.user_turns, self.limits.max_user_turns):
            return False
        self.episode.messages.append({"role": "user", "content": content})
        self.log.user_turns += 1
        return True

    @staticmethod
    def _capped(count: int, cap: int | None) -> bool:
        return cap is not None and count >= cap

    def _end(self, reason: Termination) -> State:
        self.log.terminated_by = reason
        return State.TERMINATED
