"""Schema compatibility, graph building, GraphML/PNG output, chain sampling."""

from __future__ import annotations

import networkx as nx
import pytest

from data_synth.traj.chains import ChainConfig, WalkGraph, sample_chains
from data_synth.traj.compat import compat, lexical, output_slots, tokens, type_fit
from data_synth.traj.graph import (
    ChainProposal,
    GraphConfig,
    GraphRecord,
    build_graph,
    llm_confidence,
    plot_graph,
    write_graphml,
)
from data_synth.traj.records import Server, Source, ToolDoc


def _t(name, props=None, required=(), output=None, description=""):
    return ToolDoc(
        name=name,
        description=description or name,
        parameters={"type": "object", "properties": props or {}, "required": list(required)},
        output=output,
    )


def _server(tools):
    return Server(
        key="s", server_id="s", title="S", name="s", tools=tools, source=Source(file="f", record=0, format="astra")
    )


STR = {"type": "string"}
shop = _server(
    [
        _t(
            "search_products",
            {"query": STR},
            ["query"],
            {
                "type": "object",
                "properties": {
                    "items": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"product_id": STR, "price": {"type": "number"}}},
                    }
                },
            },
        ),
        _t(
            "get_product",
            {"product_id": STR},
            ["product_id"],
            {"type": "object", "properties": {"product_id": STR, "stock": {"type": "integer"}}},
        ),
        _t("add_to_cart", {"product_id": STR, "quantity": {"type": "integer"}}, ["product_id", "quantity"]),
        _t("get_weather", {"city": STR}, ["city"], description="Current weather of a city"),
        _t("ping"),
    ]
)


def test_tokens_and_lexical_rules():
    assert tokens("getUserIDs") == ["get", "user", "id"]
    assert tokens("file_names") == ["file", "name"]
    f = output_slots(shop.tool("get_product"))[0]
    p = next(s for s in output_slots(shop.tool("get_product")) if s.name == "product_id")
    assert f.name == p.name and lexical(f, p) == 1.0


def test_compat_scores_data_flow_and_explains_it():
    c = compat(shop.tool("search_products"), shop.tool("get_product"))
    assert c.score == pytest.approx(1.0)  # items[].product_id feeds the only required input exactly
    assert c.evidence()[0].startswith("items[].product_id->product_id")
    # add_to_cart needs product_id (fed) and quantity (the task can state it): fully covered.
    assert compat(shop.tool("get_product"), shop.tool("add_to_cart")).score == pytest.approx(1.0)
    # Nothing flows into a tool without parameters, and unrelated tools score low.
    assert compat(shop.tool("get_product"), shop.tool("ping")).score == 0.0
    assert compat(shop.tool("get_weather"), shop.tool("add_to_cart")).score < 0.3
    # An opaque id nobody supplies lowers coverage (the task rarely knows it).
    lone = compat(shop.tool("get_weather"), shop.tool("get_product"))
    assert lone.coverage < 1.0


def test_type_fit_table():
    from data_synth.traj.compat import Slot

    def s(t, item=None):
        return Slot("x", "x", t, item, "")

    assert type_fit(s("integer"), s("number")) == 1.0
    assert type_fit(s("number"), s("integer")) == 0.7
    assert type_fit(s("array", "string"), s("string")) == pytest.approx(0.8)
    assert type_fit(s("boolean"), s("array", "integer")) == 0.0
    assert type_fit(s(None), s("string")) == 0.5


def test_graph_combines_llm_and_schema_and_drops_weak_pairs():
    samples = [
        [ChainProposal(tools=["search_products", "get_product", "add_to_cart"], confidence=0.9)],
        [
            ChainProposal(tools=["get_weather", "ping"], confidence=0.8),
            ChainProposal(tools=["search_products", "get_product"], confidence=0.5),
        ],
    ]
    conf = llm_confidence(samples)
    assert conf[("search_products", "get_product")] == pytest.approx((0.9 + 0.5) / 2)
    assert conf[("get_weather", "ping")] == pytest.approx(0.4)  # proposed in one sample of two
    rec = build_graph(shop, samples, GraphConfig(alpha=0.5, llm_min=0.4, compat_min=0.5))
    edges = {(e.source, e.target): e for e in rec.edges}
    e = edges[("search_products", "get_product")]
    assert e.origin == ["llm", "schema"] and e.weight == pytest.approx(0.5 * 0.7 + 0.5 * 1.0)
    assert edges[("get_weather", "ping")].origin == ["llm"]  # state dependency: the schemas cannot see it
    assert ("get_weather", "add_to_cart") not in edges
    with pytest.raises(ValueError, match="unknown tools"):
        build_graph(shop, [[ChainProposal(tools=["search_products", "teleport"], confidence=1.0)]])


def test_graph_record_round_trips_and_exports(tmp_path):
    rec = build_graph(shop, [])
    assert rec.proposal_samples == 0 and all(e.origin == ["schema"] for e in rec.edges)
    again = GraphRecord.model_validate_json(rec.model_dump_json())
    assert again == rec
    g = again.to_nx()
    assert set(g.nodes) == set(shop.tool_names())
    path = write_graphml([rec], tmp_path / "g.graphml")
    back = nx.read_graphml(path)
    assert back.number_of_edges() == len(rec.edges)
    assert back.edges["s/search_products", "s/get_product"]["origin"] == "schema"
    png = plot_graph(rec, tmp_path / "g.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _ring_with_chords(n=30):
    g = nx.DiGraph()
    for i in range(n):
        for d in (1, 2, 5):
            g.add_edge(f"t{i}", f"t{(i + d) % n}", weight=1.0 / d)
    return g


def test_chains_are_acyclic_bounded_capped_deduplicated_and_deterministic():
    g = _ring_with_chords()
    cfg = ChainConfig(min_len=2, max_len=5, per_start=4, seed=7)
    chains = sample_chains(g, "ring", cfg)
    keys = [tuple(c.tools) for c in chains]
    assert len(keys) == len(set(keys))
    assert all(2 <= len(c.tools) <= 5 and len(set(c.tools)) == len(c.tools) for c in chains)
    assert all(g.has_edge(a, b) for c in chains for a, b in zip(c.tools, c.tools[1:], strict=False))
    per_start = {}
    for c in chains:
        per_start[c.tools[0]] = per_start.get(c.tools[0], 0) + 1
    assert max(per_start.values()) <= 4 and len(per_start) == 30
    assert {len(c.tools) for c in chains} == {2, 3, 4, 5}
    assert [c.key for c in sample_chains(g, "ring", cfg)] == [c.key for c in chains]
    # Node order does not matter: each start node has its own RNG.
    shuffled = nx.DiGraph()
    shuffled.add_nodes_from(sorted(g.nodes, reverse=True))
    shuffled.add_edges_from(g.edges(data=True))
    assert sorted(c.key for c in sample_chains(shuffled, "ring", cfg)) == sorted(c.key for c in chains)
    assert [c.key for c in sample_chains(g, "ring", ChainConfig(per_start=4, seed=8))] != [c.key for c in chains]


def test_small_neighbourhoods_end_and_weights_bias_the_walk():
    g = nx.DiGraph()
    g.add_edge("a", "b", weight=1.0)
    chains = sample_chains(g, "s", ChainConfig(per_start=5))
    assert [c.tools for c in chains] == [["a", "b"]]  # only one chain exists; no endless retry
    heavy = nx.DiGraph()
    heavy.add_edge("a", "b", weight=0.95)
    heavy.add_edge("a", "c", weight=0.05)
    wg = WalkGraph.from_nx(heavy)
    import random

    firsts = [wg._step(0, {0}, random.Random(i)) for i in range(400)]
    assert firsts.count(wg.nodes.index("b")) > 300
    with pytest.raises(ValueError):
        ChainConfig(min_len=1)
