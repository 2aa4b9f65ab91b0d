"""The procedural family's variants: an answerable environment turned into one whose right
behaviour is another (`env_registry.variants` says what each variant is).

Each maker is a pure function of an answerable `EnvSpec`: the variant, or None where that
environment cannot carry it (then the generator draws another). They take away, never invent:
a tool removed, a value moved from the question to the scripted user, the question replaced by a
sub-question that states its inputs. `variants.VariantShares` says how many of each `generate` makes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from env_registry.answer_channel import INABILITY, root_question
from env_registry.families._tools import PureKind
from env_registry.matching import answer_in_text
from env_registry.spec import VARIANT_SPEC_VERSION, EnvSpec, ScenarioType, ScriptedUser, SubQuestion, ToolSpec, Variant

# What a first step's identifying parameter names, as the agent would ask for it.
_NOUNS = {"name": "person", "events": "event", "products": "product", "companies": "company", "cities": "city"}
# Tools without world data (unit conversion, arithmetic, dates): the same in every environment.
PURE_TOOLS = frozenset(kind.key for kind in PureKind.__subclasses__())
_OTHERWISE = "I don't know anything else about it; that is all I can tell you."


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


def unanswerable(env: EnvSpec) -> EnvSpec | None:
    """Every first step's tool removed: no step can be done; the later steps' tools stay offered."""
    first = [q for q in env.sub_questions if q.needs_tool and not q.depends_on]
    removed = {q.tool for q in first}
    root = _declining_root(first[0], [])
    tools = [_keep_answers(t, set()) for t in env.tools if t.name not in removed]
    return _variant(env, Variant.UNANSWERABLE, sub_questions=[root], tools=tools, final_answer=root.answer)


def _dependents(env: EnvSpec, start: str) -> set[str]:
    found = {start}
    for _ in env.sub_questions:
        found |= {q.id for q in env.sub_questions if set(q.depends_on) & found}
    return found


def missing_function(env: EnvSpec) -> EnvSpec | None:
    """The last step's tool removed (one step at the deepest hop, its tool used by no other, and
    one that looks data up: a pure tool's arithmetic the agent could do itself, so its absence
    would not make the question unanswerable)."""
    steps = [q for q in env.sub_questions if q.needs_tool]
    top = max(q.hop_level or 1 for q in steps)
    last = [q for q in steps if (q.hop_level or 1) == top]
    if top < 2 or len(last) != 1 or sum(q.tool == last[0].tool for q in steps) != 1:
        return None
    if last[0].tool in PURE_TOOLS:
        return None
    gone = _dependents(env, last[0].id)
    kept = [q for q in env.sub_questions if q.id not in gone]
    root = _declining_root(last[0], list(last[0].depends_on))
    ids = {q.id for q in kept}
    tools = [_keep_answers(t, ids) for t in env.tools if t.name != last[0].tool]
    return _variant(env, Variant.MISSING_FUNCTION, sub_questions=[*kept, root], tools=tools, final_answer=root.answer)


def no_tool(env: EnvSpec) -> EnvSpec | None:
    """The root leaf's own question, which states the values it is computed from, asked alone."""
    root_id = root_question(env.reward_target()).id
    root = next(q for q in env.sub_questions if q.id == root_id)
    by_id = {q.id: q for q in env.sub_questions}
    if root.needs_tool or not all(
        answer_in_text(by_id[d].answer, root.question, by_id[d].match) for d in root.depends_on
    ):
        return None
    alone = root.model_copy(update={"depends_on": [], "hop_level": None})
    tools = [_keep_answers(t, set()) for t in env.tools]  # offered, and not needed
    return _variant(env, Variant.NO_TOOL, question=root.question, sub_questions=[alone], tools=tools)


def missing_value(env: EnvSpec) -> EnvSpec | None:
    """The first step's entity taken out of the question; the scripted user holds it."""
    if env.scenario_type not in (ScenarioType.SINGLE_HOP, ScenarioType.MULTI_HOP):
        return None
    first = [q for q in env.sub_questions if q.needs_tool and not q.depends_on]
    if len(first) != 1:
        return None
    tool = env.tool(first[0].tool or "")
    if tool.call_key is None:
        return None
    golden = next((g for g in tool.golden_calls if first[0].id in g.answers), None) or tool.golden_calls[0]
    for param in tool.call_key.params:
        value = golden.args.get(param)
        value = value[0] if isinstance(value, list) and len(value) == 1 else value
        if not isinstance(value, str) or env.question.count(value) != 1:
            continue
        noun = _NOUNS.get(param, param.replace("_", " "))
        question = re.sub(rf"(?:\b[Tt]he )?{re.escape(value)}", f"the {noun} I have in mind", env.question, count=1)
        question = question[:1].upper() + question[1:]
        user = ScriptedUser(missing=f"the {noun}", value=value, reply=f"The {noun} is {value}.", otherwise=_OTHERWISE)
        return _variant(env, Variant.MISSING_VALUE, question=question, user=user)
    return None


MAKERS: dict[Variant, Callable[[EnvSpec], EnvSpec | None]] = {
    Variant.ANSWERABLE: lambda env: env,
    Variant.UNANSWERABLE: unanswerable,
    Variant.MISSING_VALUE: missing_value,
    Variant.MISSING_FUNCTION: missing_function,
    Variant.NO_TOOL: no_tool,
}
