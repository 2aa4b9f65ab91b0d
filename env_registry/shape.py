"""The shape of a decomposition trace, and the scenario type it implies.

Shape is measured on the *tool graph* T: the tool-needing sub-questions with the
`depends_on` edges among them. Non-tool sub-questions may only be leaves (a validation rule),
so leaving them out never breaks a path between tool nodes.

- hops  = the number of tool nodes on the longest dependency path of T (its depth);
- width = how many tool nodes can run independently at most (T's largest antichain); it is 1
  exactly when hops == |T|, i.e. one path visits every tool node.

Scenario types (ASTRA's four), by shape:
- single_hop:          |T| == 1
- multi_hop:           |T| >= 2 and hops == |T|   (a dependency chain: every tool node waits on the previous)
- parallel_single_hop: |T| >= 2 and hops == 1     (independent tool roots, nothing waits on a tool)
- parallel_multi_hop:  1 < hops < |T|             (independent branches and at least one dependency)
An environment without tool nodes has no scenario type (`classify` returns None).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import networkx as nx

from env_registry.spec import EnvSpec, ScenarioType, ToolSpec


@dataclass(frozen=True)
class Shape:
    tool_nodes: int
    hops: int
    roots: int  # tool nodes that depend on no tool node

    @property
    def scenario_type(self) -> ScenarioType | None:
        return classify(self.tool_nodes, self.hops)


def classify(tool_nodes: int, hops: int) -> ScenarioType | None:
    if tool_nodes == 0:
        return None
    if tool_nodes == 1:
        return ScenarioType.SINGLE_HOP
    if hops == tool_nodes:
        return ScenarioType.MULTI_HOP
    if hops == 1:
        return ScenarioType.PARALLEL_SINGLE_HOP
    return ScenarioType.PARALLEL_MULTI_HOP


def tool_graph(env: EnvSpec) -> nx.DiGraph:
    """Edges dependency -> dependent, tool nodes only (dangling dependencies are left out)."""
    tool_ids = {q.id for q in env.sub_questions if q.needs_tool}
    g = nx.DiGraph()
    g.add_nodes_from(tool_ids)
    for q in env.sub_questions:
        if q.id in tool_ids:
            g.add_edges_from((d, q.id) for d in q.depends_on if d in tool_ids and d != q.id)
    return g


def shape_of(env: EnvSpec) -> Shape:
    """Shape of an environment whose trace is acyclic (raises `nx.NetworkXUnfeasible` otherwise)."""
    g = tool_graph(env)
    hops = nx.dag_longest_path_length(g) + 1 if g.number_of_nodes() else 0
    roots = sum(1 for n in g if g.in_degree(n) == 0)
    return Shape(tool_nodes=g.number_of_nodes(), hops=hops, roots=roots)


STRUCTURE_SAMPLE = 1000  # `stats` counts distinct structures per this many environments


def tool_api(tool: ToolSpec) -> str:
    """What a tool's calls look like, independent of its name and data: its parameter names,
    required ones marked `*` (`city*,fields`). Two brands' city profiles are one API."""
    props = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    return ",".join(f"{p}*" if p in required else p for p in sorted(props))


def structure_of(env: EnvSpec) -> str:
    """The environment's structure: its decomposition with each sub-question labelled by the API
    of its tool (a leaf answered by reasoning: `reason`), written canonically from the sinks down
    (`reason(city*,fields(),city*,fields())`) and hashed. Two environments asking the same shape of
    question with the same kinds of tools share it; names and data do not matter."""
    apis = {t.name: tool_api(t) for t in env.tools}
    by_id = {q.id: q for q in env.sub_questions}
    memo: dict[str, str] = {}

    def canon(qid: str, path: frozenset[str]) -> str:
        if qid not in memo:
            q = by_id[qid]
            label = apis.get(q.tool or "", "?") if q.needs_tool else "reason"
            deps = sorted(canon(d, path | {qid}) for d in q.depends_on if d in by_id and d not in path)
            memo[qid] = f"{label}({','.join(deps)})"
        return memo[qid]

    depended = {d for q in env.sub_questions for d in q.depends_on}
    sinks = sorted(canon(q.id, frozenset()) for q in env.sub_questions if q.id not in depended)
    return hashlib.sha256("|".join(sinks).encode("utf-8")).hexdigest()[:16]
