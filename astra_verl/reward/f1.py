"""ASTRA's trajectory-level reward, as a pure function of an episode log and its target.

    n      = number of sub-questions of the environment (tool-needing ones and leaves)
    n_hat  = sub-questions solved in the episode (`solved.solved_set`)
    c      = tool calls the model attempted (`EpisodeLog.num_calls`)
    recall     r  = n_hat / n
    precision  p  = min(1, n_hat / (c + eps))
    F1            = 2 p r / (p + r), and 0 when n_hat = 0

The paper's examples hold: 4/4 solved in 4 calls -> 1.0, 4/4 in 6 calls -> 0.8, 3/4 in 4 -> 0.75.

Which calls count (c): every call the model attempted, valid or not (unknown tool, bad JSON,
arguments against the schema, a tool that raised), each call of a parallel turn separately,
repeats of an identical call each time, and calls made after everything was solved. Excluded:
calls the loop SKIPPED without running them (beyond `max_parallel_calls` in one turn). Invalid
calls count because they are the cheapest way to inflate activity; if they were free, precision
would not push against call explosion at all. Skipped calls never reached an environment: they
are the loop's refusal, and counting them would make the same behaviour score differently under
different loop settings (their cost is already the tokens spent and nothing solved).

Why precision is clipped at 1: one call can solve more than one sub-question (a merged tool
returning two answers) and leaves are solved in the final text without a call, so n_hat can
exceed c; unclipped, p > 1 would push F1 above 1 and reward skipping calls. With the clip,
eps only guards c = 0.

Environments without a tool sub-question (the no-tool and unanswerable variants, issue 49): every
call is unneeded, yet with c = 1 and the answer solved, p = min(1, 1/1) would make the first call
free. There the answer is the one needed action and precision is n_hat / (n_hat + c): 1 without
a call, 1/2 with one (F1 2/3), 1/3 with two. No environment with a tool sub-question changes.

Which sub-questions are solved is `solved.solved_set`: with `root_answer` (the default) the
root sub-question counts only when the final answer's channel (`<answer>VALUE</answer>`,
`env_registry.answer_channel`) states its answer, so golden calls followed by a refusal, a wrong
answer, a hedge or no channel lose 1/n of recall.

Ablations (docs/method.md §3.2): `recall` rewards r alone (turns explode), `precision` rewards p alone
(turns collapse); F1 is the default.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from astra_verl.calls.call_log import EpisodeLog
from astra_verl.calls.solved import root_answered, solved_set
from astra_verl.reward.episode_reward import EpisodeReward
from env_registry.call_gate import CallStatus
from env_registry.spec import RewardTarget

__all__ = ["DEFAULT_EPS", "EpisodeScore", "RewardMode", "precision_recall_f1", "score_episode"]

DEFAULT_EPS = 1e-6


class RewardMode(str, Enum):
    F1 = "f1"
    RECALL = "recall"
    PRECISION = "precision"


@dataclass(frozen=True)
class EpisodeScore:
    """One episode's reward and the counts behind it."""

    reward: float  # the value of the chosen mode: what GRPO optimises
    f1: float
    precision: float
    recall: float
    n: int  # sub-questions
    solved: int  # n_hat
    calls: int  # c
    invalid_calls: int  # unknown tool, bad JSON, schema errors
    tool_errors: int  # valid calls whose tool failed in the sandbox
    distractor_calls: int  # calls to irrelevant tools mixed in from other environments
    skipped_calls: int  # not executed, not counted in c
    turns: int  # assistant turns
    final_answer_correct: bool  # the channel states the root's answer (reported; the root rule rewards it)
    solved_ids: tuple[str, ...]

    def extra_info(self) -> dict[str, float]:
        """What the reward manager reports in `reward_extra_info`: flat, numeric, same keys always
        (verl stacks each key over the batch into one array and logs the means)."""
        return {
            "f1": self.f1,
            "precision": self.precision,
            "recall": self.recall,
            "n": float(self.n),
            "solved": float(self.solved),
            "calls": float(self.calls),
            "invalid_calls": float(self.invalid_calls),
            "tool_errors": float(self.tool_errors),
            "distractor_calls": float(self.distractor_calls),
            "skipped_calls": float(self.skipped_calls),
            "turns": float(self.turns),
            "final_answer_correct": float(self.final_answer_correct),
        }

    def as_reward(self) -> EpisodeReward:
        """The reward and counts the astra_f1/recall/precision managers hand verl."""
        return EpisodeReward(self.reward, self.extra_info())


def precision_recall_f1(n: int, solved: int, calls: int, eps: float = DEFAULT_EPS) -> tuple[float, float, float]:
    """The paper's formula on counts (precision clipped at 1; see the module docstring)."""
    if n <= 0:
        raise ValueError(f"an environment needs at least one sub-question, got n={n}")
    if not 0 <= solved <= n:
        raise ValueError(f"solved must lie in [0, n={n}], got {solved}")
    if calls < 0 or eps <= 0:
        raise ValueError(f"calls must be >= 0 and eps > 0, got calls={calls}, eps={eps}")
    if solved == 0:
        return 0.0, 0.0, 0.0
    recall = solved / n
    precision = min(1.0, solved / (calls + eps))
    return precision, recall, 2 * precision * recall / (precision + recall)


def score_episode(
    log: EpisodeLog,
    target: RewardTarget,
    mode: RewardMode = RewardMode.F1,
    eps: float = DEFAULT_EPS,
    root_answer: bool = True,
) -> EpisodeScore:
    """Score one episode against its environment's target (`root_answer`: the root sub-question
    counts only when the final answer's channel states it; see `solved.solved_set`)."""
    solved = solved_set(log, target, root_answer=root_answer)
    n = len(target.sub_questions)
    calls = log.num_calls
    # no tool sub-question: the answer is the needed action, every call an unneeded one (docstring)
    needless = not any(q.needs_tool for q in target.sub_questions)
    precision, recall, f1 = precision_recall_f1(n, len(solved), calls + len(solved) if needless else calls, eps)
    reward = {RewardMode.F1: f1, RewardMode.RECALL: recall, RewardMode.PRECISION: precision}[RewardMode(mode)]
    return EpisodeScore(
        reward=reward,
        f1=f1,
        precision=precision,
        recall=recall,
        n=n,
        solved=len(solved),
        calls=calls,
        invalid_calls=log.num_invalid_calls,
        tool_errors=log.num_tool_errors,
        distractor_calls=log.num_distractor_calls,
        skipped_calls=sum(1 for c in log.calls if c.status is CallStatus.SKIPPED),
        turns=log.assistant_turns,
        final_answer_correct=root_answered(log.final_answer, target),
        solved_ids=tuple(q.id for q in target.sub_questions if q.id in solved),
    )
