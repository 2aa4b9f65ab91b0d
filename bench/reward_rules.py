"""The two definitions of "solved" `bench/reward_hacking.py` scores every episode under: ours
(`astra_verl.reward`) and the plain rule a user would write from the paper's formula."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from astra_verl.calls.call_log import CallRecord, EpisodeLog
from astra_verl.calls.solved import is_own_tool_call, solved_by_call
from astra_verl.reward.f1 import precision_recall_f1, score_episode
from env_registry.call_gate import CallStatus
from env_registry.matching import answer_in_text
from env_registry.spec import AnswerRule, RewardTarget

# -- the plain rule: what a user writes from the paper's formula -------------------------------


def _without_rivals(rule: AnswerRule) -> AnswerRule:
    return rule.model_copy(update={"rivals": []}) if getattr(rule, "rivals", None) else rule


def plain_rule_solved_by_call(call: CallRecord, target: RewardTarget) -> list[str]:
    """The tool sub-questions one call solves under the plain rule: the call ran (status ok, its
    message reached the model), went to the sub-question's own tool of this environment, and its
    output contains the answer (`answer_in_text`). No argument check, no echo masking."""
    if call.status is not CallStatus.OK or not call.seen or not call.output or not is_own_tool_call(call, target):
        return []
    return [
        q.id
        for q in target.sub_questions
        if q.needs_tool
        and (q.tool is None or q.tool == call.tool)
        and answer_in_text(q.answer, call.output, _without_rivals(q.match))
    ]


def plain_rule_solved(log: EpisodeLog, target: RewardTarget) -> set[str]:
    """Every sub-question the plain rule counts solved (each once): tool sub-questions by
    `plain_rule_solved_by_call`, leaves by a final answer that contains the answer (no check that
    it commits to one candidate)."""
    solved = {
        q.id
        for q in target.sub_questions
        if not q.needs_tool and answer_in_text(q.answer, log.final_answer, _without_rivals(q.match))
    }
    for call in log.calls:
        solved.update(plain_rule_solved_by_call(call, target))
    return solved


@dataclass(frozen=True)
class Scored:
    """One episode under one rule."""

    f1: float
    solved_ids: frozenset[str]
    final_answer_correct: bool


def ours(log: EpisodeLog, target: RewardTarget) -> Scored:
    s = score_episode(log, target)
    return Scored(s.f1, frozenset(s.solved_ids), s.final_answer_correct)


def plain(log: EpisodeLog, target: RewardTarget) -> Scored:
    solved = plain_rule_solved(log, target)
    f1 = precision_recall_f1(len(target.sub_questions), len(solved), log.num_calls)[2]
    return Scored(
        f1,
        frozenset(solved),
        answer_in_text(target.final_answer, log.final_answer, _without_rivals(target.final_match)),
    )


@dataclass(frozen=True)
class Rule:
    """A definition of "solved": how it scores an episode and what one call solves."""

    score: Callable[[EpisodeLog, RewardTarget], Scored]
    by_call: Callable[[CallRecord, RewardTarget], list[str]]


RULES: dict[str, Rule] = {"ours": Rule(ours, solved_by_call), "plain": Rule(plain, plain_rule_solved_by_call)}
