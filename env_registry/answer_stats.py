"""Two counts of `env_registry stats` about answers: where a comparison's winner is listed, and
which sub-questions' answers echo an argument of their golden call.

- Winner position: a comparison ("Which of A, B and C ...?") whose winner sits at one listing
  position more often than chance pays a fixed-position guess; the procedural generator draws
  the position uniformly (`families._tasks._winner_at_random`), and the table shows it per
  number of candidates.
- Echo answers: a sub-question whose answer equals an argument of its golden call (the max of
  [3, 7, 5] is 7) is retrieved only by that golden call; the reward matches the golden call
  without the echo mask (`astra_verl.calls.solved`), every other call with it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from env_registry.matching import answer_in_output
from env_registry.spec import EnvSpec, SubQuestion

__all__ = ["AnswerCounts", "echo_answers", "winner_position"]


def winner_position(env: EnvSpec) -> tuple[int, int] | None:
    """(number of candidates, 1-based position of the winner as the comparison lists them), or
    None when the environment has no comparison leaf."""
    leaf = next((q for q in env.sub_questions if not q.needs_tool and q.match.rivals), None)
    if leaf is None:
        return None
    names = [leaf.answer, *leaf.match.rivals]
    where = {n: leaf.question.find(n) for n in names}
    if any(i < 0 for i in where.values()):
        return None  # a comparison that does not list its candidates by name
    return len(names), sorted(names, key=where.__getitem__).index(leaf.answer) + 1


def _echoes(env: EnvSpec, q: SubQuestion) -> bool:
    if not q.needs_tool or q.tool is None:
        return False
    try:
        tool = env.tool(q.tool)
    except KeyError:
        return False
    golden = [g for g in tool.golden_calls if q.id in g.answers] or [
        g for g in tool.golden_calls if not g.answers and g.expected.strip() == q.answer.strip()
    ]
    return any(not answer_in_output(q.answer, q.answer, g.args, q.match) for g in golden)


def echo_answers(env: EnvSpec) -> int:
    """How many of the environment's sub-questions have an answer equal to a golden-call argument."""
    return sum(_echoes(env, q) for q in env.sub_questions)


@dataclass
class AnswerCounts:
    """Both counts over a store, one environment at a time."""

    winners: Counter = field(default_factory=Counter)  # "k candidates: position p" -> environments
    echoes: int = 0

    def add(self, env: EnvSpec) -> None:
        won = winner_position(env)
        if won is not None:
            self.winners[f"{won[0]} candidates: position {won[1]}"] += 1
        self.echoes += echo_answers(env)

    def summary(self) -> dict[str, Any]:
        return {"winner_position": dict(sorted(self.winners.items())), "echo_answer_sub_questions": self.echoes}
