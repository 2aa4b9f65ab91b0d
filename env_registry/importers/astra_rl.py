"""An ASTRA-RL-1k row with recovered golden calls, as a version-2 `EnvSpec`.

`env_registry.recovery` finds the calls; this builds the environment from the row and them:

- a sub-question per target answer (`sub_qa_dict[tool][k]`), in the row's order, ids `q1`,
  `q2`, ...; its text names the tool and the answer (the release has no sub-question texts, and
  the reward never shows them to the policy), `needs_tool` with `tool` the answer's tool;
- `depends_on`: the sub-questions whose recovered calls' outputs gave an argument value of this
  one's call (the dependency order the search found them in);
- per tool, its recovered golden calls (each with `answers` = its sub-question; calls found
  interchangeable are further golden calls of the same sub-question) and the identifying
  parameters derived from them as for synthesized tools (`env_registry.call_key`);
- the question: the last user turn; the final answer: the answers of the sub-questions nothing
  depends on, joined with "; " (the release has none; the reward counts tool sub-questions,
  and the final answer is only reported);
- the scenario type the trace's shape implies; provenance `astra_rl_recovered`, the source row
  and how each call was found (`found_by` per golden call, in `Provenance.source`'s note).

A row whose answers are not all recovered stays rejected with each answer's reason, unless the
user asks for the plain rule (`--reward-rule plain`): it is then imported with generator
`astra_rl_plain` and no identifying parameters, so a call of the answer's own tool whose output
contains the answer solves it (ASTRA's own rule, the one `bench/reward_hacking.py` shows pays
hedges and echoes); the golden calls that were recovered are kept and replayed, the others'
absence is waived (`env_registry.family_rules.PLAIN_RL`).
"""

from __future__ import annotations

import json
from typing import Any

from env_registry.answer_channel import inferred_type
from env_registry.call_key import tool_defaults
from env_registry.family_rules import PLAIN_RL_GENERATOR
from env_registry.importers.astra import Conversion, RlRow, _language, _scenario_type
from env_registry.recovery import RowRecovery, RowTools
from env_registry.spec import CallKey, EnvSpec, GoldenCall, Provenance, ScenarioType, SubQuestion, ToolSpec
from env_registry.structure import Rule, ValidationIssue

__all__ = ["RECOVERED_GENERATOR", "recovered_call_key", "recovered_conversion", "recovery_summary", "row_tools"]

RECOVERED_GENERATOR = "astra_rl_recovered"


def row_tools(row: RlRow) -> RowTools:
    return RowTools(
        text=row.text,
        schemas={t.name: t.parameters for t in row.tools},
        sources={t.name: t.source for t in row.tools},
        targets=row.targets,
    )


def recovered_call_key(tool: ToolSpec) -> CallKey | None:
    """The identifying parameters of a tool with recovered calls: the required parameters its calls
    pass (the entity, the key) and every enum or boolean modifier of its schema, passed or not
    (a recovered call that left a modifier at its default asked for the default: a call setting
    it otherwise asks something else); list parameters may hold more items than the recovered
    call's one when they list entities (a batch call over every compared entity asks about this
    one too), not when they list numbers (the operands of a sum are exactly these)."""
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    passed = {p for g in tool.golden_calls for p in g.args}

    def modifier(prop: dict[str, Any]) -> bool:
        return isinstance(prop.get("enum"), list) or prop.get("type") == "boolean"

    params = [p for p, prop in props.items() if (p in required and p in passed) or modifier(prop)]
    if not params:
        return None
    defaults = {p: v for p, v in tool_defaults(tool).items() if p in params}
    includes = [
        p for p in params if props[p].get("type") == "array" and (props[p].get("items") or {}).get("type") == "string"
    ]
    return CallKey(params=params, defaults=defaults, includes=includes)


def _answer_ids(row: RlRow) -> dict[str, str]:
    """Answer id (`tool#k`, as recovery names it) -> sub-question id."""
    ids = [f"{tool}#{k}" for tool, answers in row.targets.items() for k in range(len(answers))]
    return {a: f"q{n}" for n, a in enumerate(ids, 1)}


def _sub_questions(row: RlRow, rec: RowRecovery, qid: dict[str, str]) -> list[SubQuestion]:
    found = {r.id: r for r in rec.recovered}
    out = []
    for tool, answers in row.targets.items():
        for k, answer in enumerate(answers):
            r = found.get(f"{tool}#{k}")
            out.append(
                SubQuestion(
                    id=qid[f"{tool}#{k}"],
                    question=f"What does {tool} return that contains {answer!r}? (ASTRA-RL-1k answer {k + 1} of {tool})",
                    answer=answer,
                    depends_on=[qid[d] for d in r.depends_on] if r else [],
                    tool=tool,
                )
            )
    return out


def _final_answer(questions: list[SubQuestion]) -> str:
    used = {d for q in questions for d in q.depends_on}
    return "; ".join(q.answer for q in questions if q.id not in used)


def _found_by_note(rec: RowRecovery, qid: dict[str, str]) -> str:
    return json.dumps({qid[r.id]: r.found_by for r in rec.recovered}, sort_keys=True, ensure_ascii=False)


def recovered_conversion(row: RlRow, rec: RowRecovery, source: str, domain: str, *, plain: bool = False) -> Conversion:
    """The environment of a row whose golden calls were recovered, or the row's rejection with
    every unrecovered answer's reason (see the module docstring; `plain`: import it anyway)."""
    qid = _answer_ids(row)
    plain = plain and bool(rec.missing)  # a fully recovered row is scored by our rule either way
    if rec.missing and not plain:
        gave_up = f" ({rec.gave_up})" if rec.gave_up else ""
        issues = [
            ValidationIssue(
                "",
                f"sub_qa_dict[{a.split('#')[0]!r}][{a.split('#')[1]}]",
                Rule.GOLDEN_PRESENT,
                f"no golden call recovered{gave_up}: {why}",
            )
            for a, why in rec.missing.items()
        ]
        return Conversion("rl_1k", None, issues)
    questions = _sub_questions(row, rec, qid)
    tools = [t.model_copy(deep=True) for t in row.tools]
    by_name = {t.name: t for t in tools}
    for r in rec.recovered:
        for args in [r.args, *r.alternatives]:
            by_name[r.tool].golden_calls.append(GoldenCall(args=args, expected=r.answer, answers=[qid[r.id]]))
    if not plain:
        for t in tools:
            t.call_key = recovered_call_key(t) if t.golden_calls else None
    spec = EnvSpec(
        domain=domain,
        language=_language(row.question),
        question=row.question,
        final_answer=_final_answer(questions),
        scenario_type=ScenarioType.MULTI_HOP,
        sub_questions=questions,
        tools=tools,
        provenance=Provenance(
            generator=PLAIN_RL_GENERATOR if plain else RECOVERED_GENERATOR,
            source=f"{source} found_by={_found_by_note(rec, qid)}",
        ),
    )
    spec = spec.model_copy(update={"scenario_type": _scenario_type(spec), "answer_type": inferred_type(spec)}).with_id()
    return Conversion("rl_1k", spec, [])


def recovery_summary(rec: RowRecovery) -> dict[str, Any]:
    """A JSON-able account of one row's recovery (for `recover-calls` output)."""
    return {
        "recovered": [
            {
                "answer": r.id,
                "args": r.args,
                "found_by": r.found_by,
                "depends_on": r.depends_on,
                "alternatives": r.alternatives,
            }
            for r in rec.recovered
        ],
        "missing": rec.missing,
        "gave_up": rec.gave_up,
        "calls_run": rec.calls_run,
        "seconds": round(rec.seconds, 3),
    }
