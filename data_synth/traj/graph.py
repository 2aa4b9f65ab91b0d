"""The tool dependency graph of one server (docs/method.md §1.1): a networkx `DiGraph` whose
edge A -> B says "B can consume what A produces".

Edges come from two sources, and every edge keeps both numbers:

- `llm`: the LLM's chain proposals (`propose.py`). An edge's `llm` confidence is, per proposal
  sample, the highest confidence of a proposed chain in which A is immediately followed by B,
  averaged over the samples (0 when never proposed).
- `compat`: the schema-compatibility score of `compat.compat(A, B)` (a documented rule there).

An edge exists when `llm >= llm_min` or `compat >= compat_min`, and its weight is
`alpha * llm + (1 - alpha) * compat` (defaults: alpha 0.5, llm_min 0.5, compat_min 0.3): an
LLM-proposed pair whose schemas also fit outranks one the LLM proposed alone, which outranks a
pair that only the schemas suggest. Weights bias the chain walks (`chains.py`).

On disk: one `GraphRecord` JSON line per server, and GraphML (`write_graphml`) for other tools;
`plot_graph` draws one server's graph to PNG.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx

from astra_foundation.strict import StrictModel
from data_synth.traj.compat import compat
from data_synth.traj.records import ChainProposal, Edge, GraphRecord, Server


class GraphConfig(StrictModel):
    section = "graph"

    alpha: float = 0.5
    llm_min: float = 0.5
    compat_min: float = 0.3


def llm_confidence(samples: list[list[ChainProposal]]) -> dict[tuple[str, str], float]:
    """Per edge, the mean over samples of the best confidence of a chain that walks it."""
    if not samples:
        return {}
    total: dict[tuple[str, str], float] = {}
    for proposals in samples:
        best: dict[tuple[str, str], float] = {}
        for p in proposals:
            for a, b in zip(p.tools, p.tools[1:], strict=False):
                if a != b:
                    best[(a, b)] = max(best.get((a, b), 0.0), p.confidence)
        for edge, c in best.items():
            total[edge] = total.get(edge, 0.0) + c
    return {edge: c / len(samples) for edge, c in total.items()}


def build_graph(server: Server, samples: list[list[ChainProposal]], cfg: GraphConfig | None = None) -> GraphRecord:
    """The server's graph from its proposal samples (possibly none) and the schema scores."""
    cfg = cfg or GraphConfig()
    names = set(server.tool_names())
    llm = llm_confidence(samples)
    unknown = {t for edge in llm for t in edge} - names
    if unknown:
        raise ValueError(
            f"server {server.server_id}: proposals name unknown tools {sorted(unknown)} (filter them first)"
        )
    edges = []
    for a in server.tools:
        for b in server.tools:
            if a.name == b.name:
                continue
            c = compat(a, b)
            lc = llm.get((a.name, b.name), 0.0)
            origin = [src for src, ok in (("llm", lc >= cfg.llm_min), ("schema", c.score >= cfg.compat_min)) if ok]
            if not origin:
                continue
            edges.append(
                Edge(
                    source=a.name,
                    target=b.name,
                    weight=round(cfg.alpha * lc + (1 - cfg.alpha) * c.score, 4),
                    llm=round(lc, 4),
                    compat=c.score,
                    feed=c.feed,
                    coverage=c.coverage,
                    origin=origin,
                    evidence=c.evidence(),
                )
            )
    return GraphRecord(
        key=server.server_id,
        server_id=server.server_id,
        nodes=server.tool_names(),
        edges=edges,
        proposal_samples=len(samples),
    )


def write_graphml(records: list[GraphRecord], path: str | Path) -> Path:
    """All servers' graphs in one GraphML file (node ids `server/tool`, list attributes joined
    with `;`, since GraphML holds scalars only)."""
    g = nx.DiGraph()
    for rec in records:
        for n in rec.nodes:
            g.add_node(f"{rec.server_id}/{n}", server=rec.server_id, tool=n)
        for e in rec.edges:
            attrs: dict[str, Any] = e.model_dump(exclude={"source", "target"})
            attrs["origin"] = ";".join(e.origin)
            attrs["evidence"] = ";".join(e.evidence)
            g.add_edge(f"{rec.server_id}/{e.source}", f"{rec.server_id}/{e.target}", **attrs)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    nx.write_graphml(g, path)
    return path


def plot_graph(record: GraphRecord, path: str | Path) -> Path:
    """A PNG of one server's graph: edge width by weight, colour by origin (both, LLM only,
    schema only)."""
    import matplotlib  # lazy: heavy, only the plot needs it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = record.to_nx()
    colours = {("llm", "schema"): "tab:purple", ("llm",): "tab:blue", ("schema",): "tab:orange"}
    fig, ax = plt.subplots(figsize=(9, 7))
    pos = nx.circular_layout(g)
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color="#dde6f0", node_size=900)
    nx.draw_networkx_labels(g, pos, ax=ax, font_size=7)
    for origin, colour in colours.items():
        es = [(u, v) for u, v, d in g.edges(data=True) if tuple(d["origin"]) == origin]
        widths = [0.5 + 4 * g.edges[e]["weight"] for e in es]
        nx.draw_networkx_edges(
            g,
            pos,
            edgelist=es,
            ax=ax,
            edge_color=colour,
            width=widths,
            arrowsize=12,
            node_size=900,
            connectionstyle="arc3,rad=0.12",
        )
        ax.plot([], [], color=colour, label=" + ".join(origin))
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title(f"{record.server_id}: {len(g)} tools, {g.number_of_edges()} edges (width = weight)")
    ax.axis("off")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
