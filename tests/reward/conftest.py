"""Builders for reward tests: a four-sub-question environment target and call records."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from astra_verl.calls.call_log import CallRecord, EpisodeLog
from env_registry.call_gate import CallStatus
from env_registry.spec import RewardTarget, TargetSubQuestion

ENV = "env-trip"


def target(n_tool: int = 4, leaf: str | None = None) -> RewardTarget:
    """Sub-questions q1..qn, qi answered by tool ti with answer 'ai' (numbers for q1, q2)."""
    answers = {1: "1200", 2: "3.75", 3: "Lisbon", 4: "Blue Line"}
    qs = [
        TargetSubQuestion(id=f"q{i}", answer=answers.get(i, f"answer {i}"), needs_tool=True, tool=f"t{i}")
        for i in range(1, n_tool + 1)
    ]
    if leaf is not None:
        qs.append(TargetSubQuestion(id="leaf", answer=leaf, needs_tool=False))
    return RewardTarget(env_id=ENV, final_answer=leaf or qs[-1].answer, sub_questions=qs)


def call(
    tool: str | None,
    output: str = "",
    status: CallStatus = CallStatus.OK,
    *,
    turn: int = 1,
    index: int = 0,
    distractor: bool = False,
    source_env: str | None = ENV,
) -> CallRecord:
    return CallRecord(
        turn=turn,
        index=index,
        tool=tool,
        arguments={},
        status=status,
        output=output,
        distractor=distractor,
        source_env=source_env,
    )


def solving_call(i: int, *, turn: int | None = None, index: int = 0) -> CallRecord:
    """A call to ti whose output contains qi's answer."""
    out = {1: '{"population": 1200}', 2: '{"rate": 3.7500001}', 3: '{"city": "lisbon"}', 4: "take the blue line"}
    return call(f"t{i}", out[i], turn=turn or i, index=index)


def episode(calls: list[CallRecord], final_answer: str = "", turns: int | None = None) -> EpisodeLog:
    return EpisodeLog(
        env_id=ENV,
        calls=calls,
        assistant_turns=turns if turns is not None else (max((c.turn for c in calls), default=0) + 1),
        final_answer=final_answer,
    )


@pytest.fixture
def build():
    """The builders as one namespace: `build.target()`, `build.call(...)`, ..."""
    return SimpleNamespace(ENV=ENV, target=target, call=call, solving_call=solving_call, episode=episode)
