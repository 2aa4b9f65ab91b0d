"""Decomposition traces: parse a model's trace, check it, derive what the model may get wrong.

Pure functions. `parse_trace` raises `ReplyError` with a stable kind, so the decompose step's
repair round can show the model what to fix and the funnel can count why traces fail:

    not_a_trace        wrong top-level shape or missing fields
    empty_answer       empty question, final answer or sub-answer
    answer_not_value   a sub-answer that is a sentence, not a value
    duplicate_ids
    unknown_dependency a dependency id that is no step
    cyclic             dependencies form a cycle (a self-dependency is one)
    hops_out_of_range  the number of sub-questions is outside the requested range

Hop levels and `is_parallel` are recomputed from the DAG (the stated ones are often off by
one); each correction is noted in the record.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import networkx as nx

from astra_foundation.llm.extract import ReplyError
from data_synth.env.records import TraceNode

MAX_ANSWER_WORDS = 25


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return str(value).strip() if isinstance(value, str) else ""


def _deps(raw: Any, node_id: str) -> list[str]:
    if raw is None or raw == "" or raw == []:
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and all(isinstance(d, (str, int)) for d in raw):
        return [str(d) for d in raw]
    raise ReplyError("not_a_trace", f"step {node_id!r}: `dependency` must be null or a list of step ids, got {raw!r}")


def parse_trace(value: Any, *, hop_min: int, hop_max: int) -> tuple[str, str, str | None, list[TraceNode], list[str]]:
    """(question, final_answer, claimed scenario type, nodes, notes) of a decompose reply."""
    if not isinstance(value, dict) or not isinstance(value.get("trace"), list):
        raise ReplyError("not_a_trace", "expected an object with `question`, `final_answer` and a `trace` list")
    question, final = _text(value.get("question")), _text(value.get("final_answer"))
    if not question or not final:
        raise ReplyError("empty_answer", "`question` and `final_answer` must be non-empty strings")
    raw_nodes = value["trace"]
    if not raw_nodes:
        raise ReplyError("not_a_trace", "`trace` is empty")
    nodes: list[TraceNode] = []
    for i, raw in enumerate(raw_nodes):
        if not isinstance(raw, dict):
            raise ReplyError("not_a_trace", f"trace[{i}] is a {type(raw).__name__}, not an object")
        node_id = _text(raw.get("_uuid", raw.get("id")))
        if not node_id:
            raise ReplyError("not_a_trace", f"trace[{i}] has no `_uuid`")
        sub_q, sub_a = _text(raw.get("sub_question")), _text(raw.get("sub_answer"))
        if not sub_q or not sub_a:
            raise ReplyError("empty_answer", f"step {node_id!r} needs a non-empty `sub_question` and `sub_answer`")
        if len(sub_a.split()) > MAX_ANSWER_WORDS:
            raise ReplyError(
                "answer_not_value",
                f"step {node_id!r}: `sub_answer` has {len(sub_a.split())} words; give the value only "
                f"(at most {MAX_ANSWER_WORDS} words)",
            )
        level = raw.get("hop_level")
        nodes.append(
            TraceNode(
                id=node_id,
                question=sub_q,
                answer=sub_a,
                depends_on=_deps(raw.get("dependency"), node_id),
                hop_level=level if isinstance(level, int) and not isinstance(level, bool) else 0,
                is_parallel=bool(raw.get("is_parallel", False)),
            )
        )
    dupes = [i for i, n in Counter(n.id for n in nodes).items() if n > 1]
    if dupes:
        raise ReplyError("duplicate_ids", f"step ids must be unique; repeated: {sorted(dupes)}")
    if not hop_min <= len(nodes) <= hop_max:
        raise ReplyError(
            "hops_out_of_range", f"the trace has {len(nodes)} sub-questions; it must have {hop_min} to {hop_max}"
        )
    nodes, notes = normalise_levels(nodes)
    claimed = value.get("scenario_type")
    return question, final, claimed if isinstance(claimed, str) else None, nodes, notes


def dag(nodes: list[TraceNode]) -> nx.DiGraph:
    """Edges dependency -> dependent; raises ReplyError for unknown ids and cycles."""
    ids = {n.id for n in nodes}
    g = nx.DiGraph()
    g.add_nodes_from(ids)
    for n in nodes:
        for d in n.depends_on:
            if d not in ids:
                raise ReplyError("unknown_dependency", f"step {n.id!r} depends on {d!r}, which is no step id")
            g.add_edge(d, n.id)
    if not nx.is_directed_acyclic_graph(g):
        cycle = " -> ".join(a for a, _ in nx.find_cycle(g))
        raise ReplyError("cyclic", f"dependencies form a cycle ({cycle}); each step may only use earlier steps")
    return g


def normalise_levels(nodes: list[TraceNode]) -> tuple[list[TraceNode], list[str]]:
    """Nodes with hop levels and `is_parallel` recomputed from the DAG, in topological order
    (ties in the model's order), and notes of every correction."""
    g = dag(nodes)
    order = {n.id: i for i, n in enumerate(nodes)}
    level: dict[str, int] = {}
    for node_id in nx.lexicographical_topological_sort(g, key=order.__getitem__):
        level[node_id] = 1 + max((level[p] for p in g.predecessors(node_id)), default=0)
    per_level = Counter(level.values())
    notes: list[str] = []
    out: list[TraceNode] = []
    for node_id in nx.lexicographical_topological_sort(g, key=order.__getitem__):
        n = next(x for x in nodes if x.id == node_id)
        lv, parallel = level[node_id], per_level[level[node_id]] > 1
        if n.hop_level != lv:
            notes.append(f"{node_id}: hop_level {n.hop_level} -> {lv}")
        if n.is_parallel != parallel:
            notes.append(f"{node_id}: is_parallel {n.is_parallel} -> {parallel}")
        out.append(n.model_copy(update={"hop_level": lv, "is_parallel": parallel}))
    return out, notes


def render_trace(nodes: list[TraceNode], *, answers: bool = True) -> str:
    """The trace as prompts show it: one JSON object per line, in ASTRA's field names."""
    lines = []
    for n in nodes:
        item: dict[str, Any] = {"_uuid": n.id, "hop_level": n.hop_level, "sub_question": n.question}
        if answers:
            item["sub_answer"] = n.answer
        item["dependency"] = n.depends_on or None
        lines.append(json.dumps(item, ensure_ascii=False))
    return "\n".join(lines)
