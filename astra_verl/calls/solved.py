"""When is a sub-question solved? The one definition the reward and the rollout share.

ASTRA's reward counts "sub-questions solved in the trajectory" without defining solved. Here a
sub-question `q` of the environment (`RewardTarget.sub_questions`) is solved in an episode when

- `q.needs_tool`: some call of the episode
    1. succeeded: `status == ok` (it parsed, matched the tool's JSON Schema and ran in the
       sandbox without error),
    2. went to `q`'s own tool (`call.tool == q.tool`) of the episode's own environment, not to a
       distractor mixed in from another environment,
    3. asked what `q` asks: its arguments agree with a golden call of `q` on the tool's
       identifying parameters (`q.call_check`: the entity, the key, the modifiers that change
       the result; `env_registry.matching.args_agree`),
    4. returned an observation containing `q.answer` outside the echoes of its own arguments,
       by `env_registry.matching.answer_in_output` with `q.match` (the rule that validated the
       environment's golden calls).
  A target whose tool-needing sub-question names no tool (`q.tool is None`) accepts an output
  of any of the environment's own tools for it (condition 2 relaxed, never dropped); one whose
  environment declares no identifying parameters (`q.call_check is None`: a version-1 spec)
  skips condition 3.
  A call that agrees with `q`'s golden call on the identifying parameters is matched without
  the echo mask of condition 4: the mask exists for calls that do not ask what `q` asks, and a
  task whose answer equals an argument (the max of [3, 7, 5] is 7) is still retrieved by its
  golden call.
- not `q.needs_tool` (a leaf that reasons over earlier answers): the episode's final answer
  (the last assistant turn without tool calls) ends with the answer channel
  (`<answer>VALUE</answer>`, `env_registry.answer_channel`) and VALUE parses to exactly one value
  of the leaf's type that states `q.answer` under `q.match`; the prose around the channel is never
  read. And every sub-question `q` depends on (`q.depends_on`) was solved in this episode (the
  dependency rule: a guess without the calls, an answer read off a tool's error message or the
  output of another tool, solves nothing).
- the root (`root_question`: the last sub-question whose answer the environment's final answer
  states), whatever its kind, counts only when the channel states its answer in the environment's
  declared answer type (`root_answer`, on by default; off is ASTRA's plain F1, for ablations):
  the question the user asked is answered only in the answer to the user.

Why these choices:
- Own tool only: the paper's intent is that the right call retrieved the value. A distractor's
  or an unrelated tool's output that happens to contain "42" retrieved nothing; counting it
  would reward calling many tools and reading numbers off them.
- The right call only: asking about another entity whose answer happens to be the same (two
  people with one occupation, two cities in one country), or with modifiers that change what
  is returned (a list sorted the wrong way, long enough to hold every candidate), retrieved
  nothing about `q`.
- Only what the tool returned: a tool that echoes its inputs (a conversion from a unit to
  itself, `new_value` in a percentage change) hands back what the model typed.
- Only tool output counts for a tool-needing question: the model typing the answer in its own
  text (a guess, or a value copied from the question) is not retrieval.
- One typed value in one channel, not a reading of prose: four passes of a rule that read what a
  sentence commits to each closed the holes they were shown while the next found as many
  (negations, dumps of every tool output, retractions, lists, rivals named after the winner;
  issue 48). A channel holding two values, a negation, a list or a question mark is no answer.
- Status ok only: a failed call's error message can echo the arguments the model typed.
- The observation is the text the model saw (after the loop's truncation): an answer cut off
  by truncation was never delivered to the model, and a call whose tool message was dropped
  because it overflowed the response budget (`CallRecord.seen` false) solves nothing.
- Dependencies and the root: F1 otherwise pays for a comparison guessed without any call (half
  the credit at n = 3) and ignores what the agent finally tells the user in every environment
  whose last step is a tool call.
- Each sub-question is solved at most once (a set); calling the same tool again solves
  nothing new. What repeated calls cost is the reward's business (`f1.py`, precision).

`CallRecord.solved` is what the rollout recorded with `solved_by_call` at the time (for logs and
early stopping); the reward recomputes from the outputs and never trusts that field.
"""

from __future__ import annotations

from astra_verl.calls.call_log import CallRecord, EpisodeLog
from env_registry.answer_channel import Verdict, judge, root_question, type_of
from env_registry.call_gate import CallStatus
from env_registry.matching import answer_in_output, answer_in_text, args_agree
from env_registry.spec import RewardTarget, TargetSubQuestion

__all__ = [
    "is_own_tool_call",
    "root_answered",
    "root_question",
    "root_verdict",
    "solved_by_call",
    "solved_by_final_answer",
    "solved_set",
]


def is_own_tool_call(call: CallRecord, target: RewardTarget) -> bool:
    """True when the call went to one of the target environment's own tools (not a distractor)."""
    if call.distractor:
        return False
    return call.source_env is None or call.source_env == target.env_id


def _answers(q: TargetSubQuestion, call: CallRecord) -> bool:
    if q.tool is not None and q.tool != call.tool:
        return False
    if q.call_check is None:
        return answer_in_output(q.answer, call.output, call.arguments, q.match)
    # the golden call itself: its echo is the answer (see the module docstring)
    return args_agree(call.arguments, q.call_check) and answer_in_text(q.answer, call.output, q.match)


def solved_by_call(call: CallRecord, target: RewardTarget) -> list[str]:
    """Ids of the tool-needing sub-questions this one call solves, in the target's order."""
    if call.status is not CallStatus.OK or not call.seen or not call.output or not is_own_tool_call(call, target):
        return []
    return [q.id for q in target.sub_questions if q.needs_tool and _answers(q, call)]


def _stated(final_answer: str, target: RewardTarget, q: TargetSubQuestion) -> bool:
    return judge(final_answer, q.answer, q.match, type_of(target, q)).counted


def solved_by_final_answer(final_answer: str, target: RewardTarget) -> list[str]:
    """Ids of the non-tool sub-questions whose answer the final answer's channel states, in the
    target's order (dependencies not checked: `solved_set` does)."""
    if not final_answer:
        return []
    return [q.id for q in target.sub_questions if not q.needs_tool and _stated(final_answer, target, q)]


def root_verdict(final_answer: str, target: RewardTarget) -> Verdict:
    """What the final answer's channel holds for the root, and why it counts or not (the viewer)."""
    root = root_question(target)
    return judge(final_answer, root.answer, root.match, type_of(target, root))


def root_answered(final_answer: str, target: RewardTarget) -> bool:
    """The final answer's channel states the root's answer in the environment's answer type (what
    the root rule and `final_answer_correct` ask; an episode driver waits for it to stop early)."""
    return bool(final_answer and target.sub_questions) and _stated(final_answer, target, root_question(target))


def solved_set(log: EpisodeLog, target: RewardTarget, root_answer: bool = True) -> set[str]:
    """Every sub-question the episode solved: tool-needing ones by calls, leaves by the final
    answer's channel once their dependencies are solved; with `root_answer`, the root only when
    the channel states its answer."""
    solved: set[str] = set()
    pending = {q.id for q in target.sub_questions if q.needs_tool}
    for call in log.calls:
        if not pending:
            break  # later calls can only re-solve; they still cost precision in f1.py
        for qid in solved_by_call(call, target):
            if qid in pending:
                pending.discard(qid)
                solved.add(qid)
    committed = set(solved_by_final_answer(log.final_answer, target))
    leaves = [q for q in target.sub_questions if not q.needs_tool]
    for _ in leaves:  # a leaf may depend on another leaf: settle them in as many passes
        for q in leaves:
            if q.id in committed and all(d in solved for d in q.depends_on):
                solved.add(q.id)
    if root_answer and target.sub_questions:
        root = root_question(target)
        if root.id in solved and not root_answered(log.final_answer, target):
            solved.discard(root.id)
    return solved
