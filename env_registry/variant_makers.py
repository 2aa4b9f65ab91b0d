"""Variant makers: an answerable environment of any family turned into one whose right behaviour
is another (`env_registry.variants` says what each variant is).

Each maker is a pure function of an answerable `EnvSpec` and what its family knows of its own
tools (`VariantHints`): the variant, or a `CannotCarry` saying why that environment cannot
carry it (one of a few fixed reasons, an enum, so a caller can count them). They take away, never invent: a tool
removed, a value moved from the question to the scripted user, the question replaced by a
sub-question that states its inputs.

What a maker needs to know about a family comes from data, never from the family's name:

- which tools only compute (arithmetic, unit conversion: the agent could do it without the
  tool, so removing one makes nothing unanswerable): the family's table where it keeps one (the
  procedural family's pure tools), else the golden calls: a tool whose every argument is a number
  or a value its schema enumerates looks nothing up;
- what noun an identifying parameter names, as the agent would ask for it: the family's table
  (procedural: `cities` -> city), else the parameter's own name;
- the identifying parameters: the tool's `call_key`, else the ones its schema implies
  (`call_key.derive_call_key`, as for synthesized tools; ASTRA's imported tools declare none);
- hop levels: as stated, else as the dependencies imply (imported traces state none).

The procedural family's makers (`families._variants.PROCEDURAL_MAKERS`) are these with its
tables; `python -m env_registry derive-variants` applies them to a store's environments of every
family, each with its family's hints (`env_registry.families.variant_hints`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum

from pydantic import Field

from astra_foundation.strict import StrictModel
from env_registry.answer_channel import INABILITY, root_question
from env_registry.call_key import derive_call_key
from env_registry.matching import answer_in_text
from env_registry.spec import VARIANT_SPEC_VERSION, EnvSpec, ScenarioType, ScriptedUser, SubQuestion, ToolSpec, Variant

__all__ = ["MAKERS", "CannotCarry", "VariantHints", "make"]

_OTHERWISE = "I don't know anything else about it; that is all I can tell you."


class VariantHints(StrictModel):
    """What a family knows of its own tools that the makers cannot read from an environment."""

    section = "variant hints"

    nouns: dict[str, str] = Field(default_factory=dict, description="identifying parameter -> the noun it names")
    pure_tools: frozenset[str] | None = Field(
        default=None, description="tools that only compute; None: read from each tool's golden calls"
    )


class CannotCarry(str, Enum):
    """Why an environment cannot carry a variant: the fixed reasons a maker gives instead of one
    (the value is what `derive-variants` prints)."""

    NOT_ANSWERABLE = "not an answerable environment"
    NO_TRACE = "no sub-question trace"
    NO_TOOL_STEP = "no step needs a tool"
    ONE_HOP = "one hop: no earlier step to keep"
    SEVERAL_LAST_STEPS = "several steps at the deepest hop"
    LAST_TOOL_SHARED = "the last step's tool serves another step too"
    LAST_TOOL_COMPUTES = "the last step's tool only computes (the agent could do it)"
    ROOT_NEEDS_TOOL = "the root needs a tool"
    ROOT_HIDES_INPUTS = "the root's question does not state its inputs"
    PARALLEL = "parallel: several entities, which one would the user hold?"
    NOT_ONE_FIRST_STEP = "not exactly one first step"
    NO_IDENTIFYING_PARAMETER = "the first step's tool has no identifying parameter"
    NO_GOLDEN_CALL = "the first step's tool has no golden call"
    VALUE_NOT_STATED_ONCE = "no identifying value is stated once, as a whole word, in the question"


def _capability(q: SubQuestion) -> str:
    return f"no tool for: {q.question.rstrip('?').strip()}"


def _declining_root(missing: SubQuestion, depends_on: list[str]) -> SubQuestion:
    return SubQuestion(
        id=f"{missing.id}_missing",
        question=missing.question,
        answer=f"{INABILITY} {_capability(missing)}",
        depends_on=depends_on,
        needs_tool=False,
    )


def _keep_answers(tool: ToolSpec, kept: set[str]) -> ToolSpec:
    """`tool` with its golden calls' `answers` limited to sub-questions still there; a call that
    answered only removed ones is dropped where the tool keeps others (it is replayed otherwise)."""
    calls = [g.model_copy(update={"answers": [a for a in g.answers if a in kept]}) for g in tool.golden_calls]
    useful = [g for g, old in zip(calls, tool.golden_calls, strict=True) if g.answers or not old.answers]
    return tool.model_copy(update={"golden_calls": useful or [c.model_copy(update={"answers": []}) for c in calls]})


def _variant(env: EnvSpec, variant: Variant, **fields) -> EnvSpec:
    body = env.model_dump(exclude={"id", "spec_version", "variant", "user"})
    body.update(fields)
    return EnvSpec.create(spec_version=VARIANT_SPEC_VERSION, variant=variant, **body)


def _first_steps(env: EnvSpec) -> list[SubQuestion]:
    return [q for q in env.sub_questions if q.needs_tool and not q.depends_on]


def unanswerable(env: EnvSpec, hints: VariantHints) -> EnvSpec | CannotCarry:
    """Every first step's tool removed: no step can be done; the later steps' tools stay offered."""
    first = _first_steps(env)
    if not first:
        return CannotCarry.NO_TOOL_STEP
    removed = {q.tool for q in first}
    root = _declining_root(first[0], [])
    tools = [_keep_answers(t, set()) for t in env.tools if t.name not in removed]
    return _variant(env, Variant.UNANSWERABLE, sub_questions=[root], tools=tools, final_answer=root.answer)


def _dependents(env: EnvSpec, start: str) -> set[str]:
    found = {start}
    for _ in env.sub_questions:
        found |= {q.id for q in env.sub_questions if set(q.depends_on) & found}
    return found


def _levels(env: EnvSpec) -> dict[str, int]:
    """Each sub-question's hop level: as stated, else 1 + the largest of its dependencies' (a
    stored trace is a DAG, and validation holds stated levels to this)."""
    by_id = {q.id: q for q in env.sub_questions}
    level: dict[str, int] = {}

    def of(q: SubQuestion) -> int:
        if q.id not in level:
            level[q.id] = q.hop_level or (1 + max((of(by_id[d]) for d in q.depends_on if d in by_id), default=0))
        return level[q.id]

    return {q.id: of(q) for q in env.sub_questions}


def _only_computes(tool: ToolSpec, hints: VariantHints) -> bool:
    """Whether `tool` computes from what it is given rather than looking anything up."""
    if hints.pure_tools is not None:
        return tool.name in hints.pure_tools
    props = tool.parameters.get("properties") or {}

    def given(param: str, value: object) -> bool:
        values = value if isinstance(value, list) else [value]
        enum = (props.get(param) or {}).get("enum") or []
        return all(isinstance(v, int | float) or v in enum for v in values)

    return bool(tool.golden_calls) and all(given(p, v) for g in tool.golden_calls for p, v in g.args.items())


def missing_function(env: EnvSpec, hints: VariantHints) -> EnvSpec | CannotCarry:
    """The last step's tool removed (one step at the deepest hop, its tool used by no other, and
    one that looks data up: a tool that only computes does what the agent could do itself, so
    its absence would not make the question unanswerable)."""
    steps = [q for q in env.sub_questions if q.needs_tool]
    level = _levels(env)
    top = max((level[q.id] for q in steps), default=0)
    last = [q for q in steps if level[q.id] == top]
    if top < 2:
        return CannotCarry.ONE_HOP
    if len(last) != 1:
        return CannotCarry.SEVERAL_LAST_STEPS
    if sum(q.tool == last[0].tool for q in steps) != 1:
        return CannotCarry.LAST_TOOL_SHARED
    if _only_computes(env.tool(last[0].tool or ""), hints):
        return CannotCarry.LAST_TOOL_COMPUTES
    gone = _dependents(env, last[0].id)
    kept = [q for q in env.sub_questions if q.id not in gone]
    root = _declining_root(last[0], list(last[0].depends_on))
    ids = {q.id for q in kept}
    tools = [_keep_answers(t, ids) for t in env.tools if t.name != last[0].tool]
    return _variant(env, Variant.MISSING_FUNCTION, sub_questions=[*kept, root], tools=tools, final_answer=root.answer)


def no_tool(env: EnvSpec, hints: VariantHints) -> EnvSpec | CannotCarry:
    """The root leaf's own question, which states the values it is computed from, asked alone."""
    root_id = root_question(env.reward_target()).id
    root = next(q for q in env.sub_questions if q.id == root_id)
    by_id = {q.id: q for q in env.sub_questions}
    if root.needs_tool:
        return CannotCarry.ROOT_NEEDS_TOOL
    if not all(answer_in_text(by_id[d].answer, root.question, by_id[d].match) for d in root.depends_on):
        return CannotCarry.ROOT_HIDES_INPUTS
    alone = root.model_copy(update={"depends_on": [], "hop_level": None})
    tools = [_keep_answers(t, set()) for t in env.tools]  # offered, and not needed
    return _variant(env, Variant.NO_TOOL, question=root.question, sub_questions=[alone], tools=tools)


def missing_value(env: EnvSpec, hints: VariantHints) -> EnvSpec | CannotCarry:
    """The first step's entity taken out of the question; the scripted user holds it."""
    if env.scenario_type not in (ScenarioType.SINGLE_HOP, ScenarioType.MULTI_HOP):
        return CannotCarry.PARALLEL
    first = _first_steps(env)
    if len(first) != 1:
        return CannotCarry.NOT_ONE_FIRST_STEP
    tool = env.tool(first[0].tool or "")
    if not tool.golden_calls:  # an ASTRA-RL-1k row's tool under the plain rule, its call not recovered
        return CannotCarry.NO_GOLDEN_CALL  # (no value the user could hold is known)
    key = tool.call_key or derive_call_key(tool)
    if key is None:
        return CannotCarry.NO_IDENTIFYING_PARAMETER
    golden = next((g for g in tool.golden_calls if first[0].id in g.answers), None) or tool.golden_calls[0]
    for param in key.params:
        value = golden.args.get(param)
        value = value[0] if isinstance(value, list) and len(value) == 1 else value
        if not isinstance(value, str) or not _stated_once(value, env.question):
            continue
        noun = hints.nouns.get(param, param.replace("_", " "))
        question = re.sub(rf"(?:\b[Tt]he )?{re.escape(value)}", f"the {noun} I have in mind", env.question, count=1)
        question = question[:1].upper() + question[1:]
        user = ScriptedUser(missing=f"the {noun}", value=value, reply=f"The {noun} is {value}.", otherwise=_OTHERWISE)
        return _variant(env, Variant.MISSING_VALUE, question=question, user=user)
    return CannotCarry.VALUE_NOT_STATED_ONCE


def _stated_once(value: str, question: str) -> bool:
    """`value` occurs once in `question`, not inside a longer word ("lamp" of "lamps"): replaced
    there, the question reads as asking for it."""
    if question.count(value) != 1:
        return False
    at = question.index(value)
    after = question[at + len(value) : at + len(value) + 1]
    before = question[at - 1 : at] if at else ""
    return not (after.isalnum() or before.isalnum())


MAKERS: dict[Variant, Callable[[EnvSpec, VariantHints], EnvSpec | CannotCarry]] = {
    Variant.UNANSWERABLE: unanswerable,
    Variant.MISSING_VALUE: missing_value,
    Variant.MISSING_FUNCTION: missing_function,
    Variant.NO_TOOL: no_tool,
}


def make(variant: Variant, env: EnvSpec, hints: VariantHints) -> EnvSpec | CannotCarry:
    """`env` made into `variant`, or why it cannot be: only an answerable environment with a
    sub-question trace carries a variant (BFCL's has none)."""
    if env.variant is not Variant.ANSWERABLE:
        return CannotCarry.NOT_ANSWERABLE
    if not env.sub_questions:
        return CannotCarry.NO_TRACE
    return MAKERS[variant](env, hints)
