"""The episode driver alone: its rules over an in-memory transport (no model, no sandbox, no verl).

The three loops that run on it are compared in tests/rollout/test_episode_driver.py; here each
rule the transports cannot show on their own: the end of the response budget, a context that
overflows, the early stop when all is solved, a hook ending the episode while the user-turn cap
refuses its message, and a step after the end.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from env_registry.call_gate import CallStatus
from env_registry.episode_driver import (
    AssistantTurn,
    CallResult,
    EpisodeCounts,
    EpisodeDriver,
    EpisodeLimits,
    HookAction,
    ParsedCall,
    Settled,
    SilentHook,
)


@dataclass
class Episode:
    messages: list[dict[str, Any]] = field(default_factory=lambda: [{"role": "user", "content": "q"}])
    log: EpisodeCounts = field(default_factory=EpisodeCounts)

    def reveal(self, refs) -> None:
        assert not list(refs)


@dataclass
class Transport:
    """Calls echo their name; `fits` admits context; `settled` is what each round settles to."""

    fits: bool = True
    settled: list[Settled] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)

    async def run_call(self, turn: int, index: int, call_id: str, call: ParsedCall) -> CallResult:
        self.ran.append(call_id)
        return CallResult(CallStatus.OK, f"ran {call.name}", (call_id, "ok"))

    def skipped(self, turn: int, index: int, call_id: str, call: ParsedCall, text: str) -> CallResult:
        return CallResult(CallStatus.SKIPPED, text, (call_id, "skipped"))

    async def admit(self, previous, records) -> bool:
        return self.fits

    async def settle(self, records) -> Settled:
        return self.settled.pop(0) if self.settled else Settled.GO_ON


class Hook(SilentHook):
    def __init__(self, at_end: HookAction | None = None):
        self.at_end = at_end

    async def on_assistant_end(self, view, content: str) -> HookAction | None:
        return self.at_end


def call(name: str = "f") -> ParsedCall:
    return ParsedCall(name=name, arguments={}, raw="{}")


def play(turns: list[AssistantTurn], transport=None, limits=None, hook=None) -> tuple[Episode, Transport]:
    ep, transport = Episode(), transport or Transport()

    async def main() -> None:
        driver = EpisodeDriver(ep, transport, limits or EpisodeLimits(), hook or SilentHook())
        await driver.reset()
        for turn in turns:
            if driver.done:
                break
            await driver.step(turn)
        await driver.close()

    asyncio.run(main())
    return ep, transport


def test_a_turn_at_the_response_limit_ends_the_episode_its_answer_kept_its_calls_not_run():
    ep, _ = play([AssistantTurn("the answer", at_limit=True)])
    assert (ep.log.final_answer, ep.log.terminated_by.value) == ("the answer", "max_length")
    ep, transport = play([AssistantTurn("", (call(),), at_limit=True)])
    assert transport.ran == [] and ep.log.terminated_by.value == "max_length"
    assert ep.messages[-1]["tool_calls"][0]["id"] == "call_0"  # the turn is in the transcript


def test_a_round_that_overflows_the_context_ends_the_episode():
    ep, transport = play([AssistantTurn("", (call(),)), AssistantTurn("never")], Transport(fits=False))
    assert transport.ran == ["call_0"] and (ep.log.assistant_turns, ep.log.terminated_by.value) == (1, "max_length")


def test_all_solved_ends_the_episode_or_leaves_one_turn_for_the_answer():
    ep, _ = play([AssistantTurn("", (call(),)), AssistantTurn("x")], Transport(settled=[Settled.END]))
    assert (ep.log.assistant_turns, ep.log.terminated_by.value) == (1, "all_solved")
    turns = [AssistantTurn("", (call(),)), AssistantTurn("", (call("g"),))]
    ep, transport = play(turns, Transport(settled=[Settled.ANSWER_TURN]))
    assert transport.ran == ["call_0"] and ep.log.terminated_by.value == "all_solved"  # g is not run
    ep, _ = play([AssistantTurn("", (call(),)), AssistantTurn("done")], Transport(settled=[Settled.ANSWER_TURN]))
    assert (ep.log.final_answer, ep.log.terminated_by.value) == ("done", "no_tool_call")


def test_a_hook_that_ends_with_a_user_message_past_the_cap_ends_it_without_the_message():
    hook = Hook(HookAction(user_message="bye", terminate=True))
    ep, _ = play([AssistantTurn("a")], limits=EpisodeLimits(max_user_turns=0), hook=hook)
    assert (ep.log.user_turns, ep.log.terminated_by.value) == (0, "hook") and ep.messages[-1]["role"] == "assistant"
    ep, _ = play([AssistantTurn("a")], hook=hook)
    assert (ep.log.user_turns, ep.log.terminated_by.value) == (1, "hook") and ep.messages[-1]["content"] == "bye"


def test_no_step_after_the_end():
    async def main() -> None:
        driver = EpisodeDriver(Episode(), Transport(), EpisodeLimits(), SilentHook())
        await driver.step(AssistantTurn("done"))
        with pytest.raises(RuntimeError, match="after the episode ended"):
            await driver.step(AssistantTurn("more"))

    asyncio.run(main())
