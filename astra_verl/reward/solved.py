"""When is a sub-question solved? The one definition the reward and the rollout share.

ASTRA's reward counts "sub-questions solved in the trajectory" without defining solved. Here a
sub-question `q` of the environment (`RewardTarget.sub_questions`) is solved in an episode when

- `q.needs_tool`: some call of the episode
    1. succeeded: `status == ok` (it parsed, matched the tool's JSON Schema and ran in the
       sandbox without error),
    2. went to `q`'s own tool (`call.tool == q.tool`) of the episode's own environment, not to a
       distractor mixed in from another environment,
    3. returned an observation containing `q.answer`, by `env_registry.matching.answer_in_text`
       with `q.match` (the same rule that validated the environment's golden calls).
  A target whose tool-needing sub-question names no tool (`q.tool is None`) accepts an output
  of any of the environment's own tools for it (condition 2 relaxed, never dropped).
- not `q.needs_tool` (a leaf that reasons over earlier answers): the episode's final answer
  (the last assistant turn without tool calls) contains `q.answer` under `q.match`.

Why these choices:
- Own tool only: the paper's intent is that the right call retrieved the value. A distractor's
  or an unrelated tool's output that happens to contain "42" retrieved nothing; counting it
  would reward calling many tools and reading numbers off them.
- Only tool output counts for a tool-needing question: the model typing the answer in its own
  text (a guess, or a value copied from the question) is not retrieval.
- Status ok only: a failed call's error message can echo the arguments the model typed.
- The observation is the text the model saw (after the loop's truncation): an answer cut off
  by truncation was never delivered to the model, and a call whose tool message was dropped
  because it overflowed the response budget (`CallRecord.seen` false) solves nothing.
- Each sub-question is solved at most once (a set); calling the same tool again solves
  nothing new. What repeated calls cost is the reward's business (`f1.py`, precision).

`CallRecord.solved` is what the rollout recorded with `solved_by_call` at the time (for logs and
early stopping); the reward recomputes from the outputs and never trusts that field.
"""

from __future__ import annotations

from astra_verl.rollout.call_log import CallRecord, CallStatus, EpisodeLog
from env_registry.matching import answer_in_text
from env_registry.spec import RewardTarget, TargetSubQuestion

__all__ = ["is_own_tool_call", "solved_by_call", "solved_by_final_answer", "solved_set"]


def is_own_tool_call(call: CallRecord, target: RewardTarget) -> bool:
    """True when the call went to one of the target environment's own tools (not a distractor)."""
    if call.distractor:
        return False
    return call.source_env is None or call.source_env == target.env_id


def _answers(q: TargetSubQuestion, call: CallRecord) -> bool:
    return (q.tool is None or q.tool == call.tool) and answer_in_text(q.answer, call.output, q.match)


def solved_by_call(call: CallRecord, target: RewardTarget) -> list[str]:
    """Ids of the tool-needing sub-questions this one call solves, in the target's order."""
    if call.status is not CallStatus.OK or not call.seen or not call.output or not is_own_tool_call(call, target):
        return []
    return [q.id for q in target.sub_questions if q.needs_tool and _answers(q, call)]


def solved_by_final_answer(final_answer: str, target: RewardTarget) -> list[str]:
    """Ids of the non-tool sub-questions the final answer solves, in the target's order."""
    if not final_answer:
        return []
    return [q.id for q in target.sub_questions if not q.needs_tool and answer_in_text(q.answer, final_answer, q.match)]


def solved_set(log: EpisodeLog, target: RewardTarget) -> set[str]:
    """Every sub-question the episode solved (tool-needing ones by calls, leaves by the final answer)."""
    solved: set[str] = set(solved_by_final_answer(log.final_answer, target))
    pending = {q.id for q in target.sub_questions if q.needs_tool}
    for call in log.calls:
        if not pending:
            break  # later calls can only re-solve; they still cost precision in f1.py
        for qid in solved_by_call(call, target):
            if qid in pending:
                pending.discard(qid)
                solved.add(qid)
    return solved
