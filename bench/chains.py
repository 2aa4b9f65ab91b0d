"""Chain sampling (data_synth.traj.chains) vs DFS enumeration: speed, and what the sampler buys.

Two baselines, written here:
- full DFS (ASTRA's released script, from its described behaviour): from every tool, every path
  of 2..max_len tools, no cap, no sampling, cycles allowed (a tool may repeat; no self-loops, as
  the graphs have none);
- capped DFS, what an engineer would write instead of a sampler: the same DFS, acyclic, stopped
  after `per_start` paths per start tool (the sampler's budget), successors in the graph's order.
The sampler draws up to `per_start` distinct acyclic weighted walks per start tool, each of a
target length drawn uniformly from 2..max_len.

A synthetic corpus like ASTRA's (default 20,000 tools in servers of ~12 tools with a long
tail, as 19,036 tools / 1,585 servers in the paper); per-server graphs with log-normal
out-degrees (median 3) plus a few hub tools (login-like, linked to half their server).

Printed:
1. speed: chains/s of the sampler and of the capped DFS over the whole corpus, and the full DFS's
   paths/s for its first N paths (same N; these cover only the first servers);
2. what each method's chains are (same budget for sampler and capped DFS): coverage of start
   tools, tools and edges; the mean weight of the edges taken against the graph's (does it
   follow strong dependencies?); diversity per start tool (chains that are a prefix of another
   chain from the same start, mean pairwise overlap of their edge sets); length histogram;
3. the full enumeration's size per length, exact (a dynamic-programming walk count), and the full
   DFS's run time to finish, capped at `--dfs-cap-s` and **extrapolated** past the cap (labelled).

    .venv/bin/python bench/chains.py [--tools 20000] [--max-len 5] [--per-start 3] [--dfs-cap-s 15]
    .venv/bin/python bench/chains.py --quick      # what `make bench` runs
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time

from benchkit import Report, machine_line

from data_synth.traj.chains import ChainConfig, WalkGraph, sample_chains, start_rng


def synthetic_corpus(n_tools: int, seed: int) -> list[WalkGraph]:
    rng = random.Random(seed)
    graphs, made = [], 0
    while made < n_tools:
        size = min(n_tools - made, max(3, int(rng.lognormvariate(math.log(9), 0.7))))
        nodes = [f"t{made + i}" for i in range(size)]
        edges = []
        for a in nodes:
            others = [b for b in nodes if b != a]
            hub = rng.random() < 0.05
            deg = len(others) // 2 if hub else min(len(others), max(1, round(rng.lognormvariate(math.log(3), 0.6))))
            for b in rng.sample(others, deg):
                edges.append((a, b, rng.uniform(0.1, 1.0)))
        graphs.append(WalkGraph(nodes, edges))
        made += size
    return graphs


def walk_counts(graphs: list[WalkGraph], max_len: int) -> dict[int, int]:
    """Exact number of paths of each length (in tools) the DFS enumerates, cycles allowed:
    walks(L) = sum_v w_L(v), w_1(v) = 1, w_L(v) = sum over successors u of w_{L-1}(u)."""
    counts = {L: 0 for L in range(2, max_len + 1)}
    for g in graphs:
        w = [1] * len(g.nodes)
        for L in range(2, max_len + 1):
            w = [sum(w[u] for u in g.succ[v]) for v in range(len(g.nodes))]
            counts[L] += sum(w)
    return counts


def dfs_enumerate(graphs: list[WalkGraph], max_len: int, *, limit: int | None, cap_s: float):
    """The baseline: every path of 2..max_len tools from every tool (cycles allowed), as lists
    of tool names. Stops at `limit` paths (kept and returned) or after `cap_s` seconds (without
    `limit` the paths are built and dropped, to bound memory); returns (paths kept, paths
    emitted, seconds, finished)."""
    kept: list[list[str]] = []
    emitted = 0
    t0 = time.perf_counter()
    for g in graphs:
        for start in range(len(g.nodes)):
            stack = [(start, [start])]
            while stack:
                node, path = stack.pop()
                if len(path) >= 2:
                    emitted += 1
                    names = [g.nodes[i] for i in path]
                    if limit is not None:
                        kept.append(names)
                    if limit is not None and emitted >= limit:
                        return kept, emitted, time.perf_counter() - t0, False
                    if emitted & 0xFFFF == 0 and time.perf_counter() - t0 > cap_s:
                        return kept, emitted, time.perf_counter() - t0, False
                if len(path) < max_len:
                    for nxt in g.succ[node]:
                        stack.append((nxt, path + [nxt]))
    return kept, emitted, time.perf_counter() - t0, True


def capped_dfs(graphs: list[WalkGraph], max_len: int, per_start: int) -> list[list[tuple[int, ...]]]:
    """Per graph, per start tool with successors: its first `per_start` acyclic paths of
    2..max_len tools in DFS order (successors in the graph's order), as index tuples."""
    out = []
    for g in graphs:
        chains: list[tuple[int, ...]] = []
        for start in range(len(g.nodes)):
            if not g.succ[start]:
                continue
            found = 0
            stack = [(start,)]
            while stack and found < per_start:
                path = stack.pop()
                if len(path) >= 2:
                    chains.append(path)
                    found += 1
                if len(path) < max_len:
                    for nxt in reversed(g.succ[path[-1]]):  # reversed: the first successor is explored first
                        if nxt not in path:
                            stack.append((*path, nxt))
        out.append(chains)
    return out


def sampled(graphs: list[WalkGraph], cfg: ChainConfig) -> list[list[tuple[int, ...]]]:
    return [
        [walk for start in range(len(g.nodes)) if g.succ[start]
         for walk in g.walks_from(start, cfg, start_rng(cfg.seed, f"s{i}", g.nodes[start]))]
        for i, g in enumerate(graphs)
    ]  # fmt: skip


def quality(graphs: list[WalkGraph], per_graph: list[list[tuple[int, ...]]], max_len: int) -> dict:
    """Coverage, weighting and diversity of a set of chains (see the module docstring)."""
    starts = tools = edges = 0
    cov_starts = cov_tools = cov_edges = 0
    taken_w: list[float] = []
    all_w: list[float] = []
    nested = total = 0
    overlaps: list[float] = []
    lengths = {L: 0 for L in range(2, max_len + 1)}
    for g, chains in zip(graphs, per_graph, strict=True):
        weight = {(a, b): w for a in range(len(g.nodes)) for b, w in zip(g.succ[a], g.weights[a], strict=True)}
        all_w += weight.values()
        starts += sum(1 for s in g.succ if s)
        tools += len(g.nodes)
        edges += len(weight)
        by_start: dict[int, list[tuple[int, ...]]] = {}
        used_tools, used_edges = set(), set()
        for c in chains:
            by_start.setdefault(c[0], []).append(c)
            used_tools.update(c)
            pairs = list(zip(c, c[1:], strict=False))
            used_edges.update(pairs)
            taken_w += [weight[p] for p in pairs]
            lengths[len(c)] += 1
        cov_starts += len(by_start)
        cov_tools += len(used_tools)
        cov_edges += len(used_edges)
        for group in by_start.values():
            total += len(group)
            nested += sum(1 for c in group if any(o != c and o[: len(c)] == c for o in group))
            sets = [set(zip(c, c[1:], strict=False)) for c in group]
            overlaps += [len(a & b) / len(a | b) for i, a in enumerate(sets) for b in sets[i + 1 :]]
    n = sum(lengths.values())
    return {
        "chains": n,
        "starts": cov_starts / starts,
        "tools": cov_tools / tools,
        "edges": cov_edges / edges,
        "weight": sum(taken_w) / len(taken_w),
        "graph_weight": sum(all_w) / len(all_w),
        "nested": nested / max(total, 1),
        "overlap": sum(overlaps) / max(len(overlaps), 1),
        "lengths": {L: c / n for L, c in lengths.items()},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tools", type=int, default=20_000)
    ap.add_argument("--max-len", type=int, default=5)
    ap.add_argument("--per-start", type=int, default=3)
    ap.add_argument("--dfs-cap-s", type=float, default=15.0, help="wall-clock cap of the full DFS run")
    ap.add_argument("--blowup-to", type=int, default=8, help="report exact path counts up to this length")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="a smaller corpus and cap (make bench)")
    ap.add_argument("--json", metavar="PATH", help="write the summary rows as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.tools, args.dfs_cap_s = 10_000, 5.0

    print(machine_line())
    graphs = synthetic_corpus(args.tools, args.seed)
    n_edges = sum(len(s) for g in graphs for s in g.succ)
    print(
        f"corpus: {args.tools} tools in {len(graphs)} servers, {n_edges} edges "
        f"(mean out-degree {n_edges / args.tools:.2f}, max {max(len(s) for g in graphs for s in g.succ)})"
    )

    cfg = ChainConfig(min_len=2, max_len=args.max_len, per_start=args.per_start, seed=args.seed)
    t0 = time.perf_counter()
    ours = sampled(graphs, cfg)
    t_core = time.perf_counter() - t0
    t0 = time.perf_counter()
    records = [c for i, g in enumerate(graphs) for c in sample_chains(g, f"s{i}", cfg)]
    t_sample = time.perf_counter() - t0
    n = len(records)
    assert n == sum(len(c) for c in ours)
    t0 = time.perf_counter()
    capped = capped_dfs(graphs, args.max_len, args.per_start)
    t_capped = time.perf_counter() - t0
    n_capped = sum(len(c) for c in capped)
    starts = sum(1 for g in graphs for s in g.succ if s)
    print(f"\n[sampler]    {n} chains (cap {args.per_start}/start, {starts} start tools; acyclic, de-duplicated)")
    print(f"             walks (index tuples):              {t_core:.2f} s = {n / t_core:,.0f} chains/s")
    print(f"             as `Chain` records (ids, weights): {t_sample:.2f} s = {n / t_sample:,.0f} chains/s")
    print(
        f"[capped dfs] {n_capped} paths ({args.per_start}/start, acyclic): {t_capped:.2f} s = {n_capped / t_capped:,.0f} paths/s"
    )
    _, emitted, t_eq, _ = dfs_enumerate(graphs, args.max_len, limit=n, cap_s=math.inf)
    print(
        f"[full dfs]   first {emitted} paths (equal output size) in {t_eq:.2f} s = {emitted / t_eq:,.0f} paths/s "
        f"(these cover only the first servers of the corpus)"
    )

    q_ours, q_capped = quality(graphs, ours, args.max_len), quality(graphs, capped, args.max_len)
    print("\nwhat the chains are (same budget per start tool)     sampler   capped DFS")
    rows = [
        ("start tools covered", "starts", "{:.1%}"), ("tools appearing in a chain", "tools", "{:.1%}"),
        ("edges used", "edges", "{:.1%}"), ("mean weight of edges taken", "weight", "{:.3f}"),
        ("chains that are a prefix of a sibling (same start)", "nested", "{:.1%}"),
        ("mean edge-set overlap of siblings (Jaccard)", "overlap", "{:.2f}"),
    ]  # fmt: skip
    for label, key, fmt in rows:
        print(f"  {label:<52} {fmt.format(q_ours[key]):>8}   {fmt.format(q_capped[key]):>8}")
    print(f"  (mean weight of all edges: {q_ours['graph_weight']:.3f})")
    lens = "  ".join(f"{L}: {q_ours['lengths'][L]:.0%}/{q_capped['lengths'][L]:.0%}" for L in q_ours["lengths"])
    print(f"  length histogram, sampler/capped DFS: {lens}")

    counts = walk_counts(graphs, max(args.max_len, args.blowup_to))
    total = sum(c for L, c in counts.items() if L <= args.max_len)
    _, done, t_full, finished = dfs_enumerate(graphs, args.max_len, limit=None, cap_s=args.dfs_cap_s)
    rate = done / t_full
    print(f"\n[full dfs]   full enumeration to length {args.max_len}: {total:,} paths (exact count)")
    if finished:
        print(f"             ran to completion in {t_full:.1f} s ({rate:,.0f} paths/s), measured")
    else:
        print(
            f"             stopped at the {args.dfs_cap_s:.0f} s cap after {done:,} paths ({rate:,.0f} paths/s); "
            f"EXTRAPOLATED time to finish: {total / rate:,.0f} s"
        )
    print("paths per length (exact DP count of what the full DFS enumerates; time EXTRAPOLATED at its measured rate)")
    print(f"{'len':>4} {'dfs paths':>16} {'dfs time (s)':>14} {'sampled chains':>15}")
    per_len = {L: sum(1 for c in records if len(c.tools) == L) for L in counts}
    for L, c in counts.items():
        s = str(per_len[L]) if L <= args.max_len else "-"
        print(f"{L:>4} {c:>16,} {c / rate:>14,.1f} {s:>15}")
    growth = [counts[L + 1] / counts[L] for L in counts if L + 1 in counts and counts[L]]
    print(f"growth factor per extra tool: {min(growth):.2f}..{max(growth):.2f}")

    speed_capped = (n / t_core) / (n_capped / t_capped)
    full_time = t_full if finished else total / rate
    print("\nratios")
    print(f"  speed, sampler walks/s / capped DFS paths/s (same budget): {speed_capped:.2f}x")
    print(f"  speed, sampler walks/s / full DFS paths/s (equal output size): {(n / t_core) / (emitted / t_eq):.2f}x")
    print(f"  output to cover every start tool, full DFS paths / sampled chains: {total / n:,.0f}x")
    print(
        f"  time to cover every start tool, full DFS ({'measured' if finished else 'extrapolated'}) / sampler: {full_time / t_sample:,.0f}x"
    )
    print(machine_line())

    report = Report("bench/chains.py")
    report.add(what=f"tool chains, {args.tools:,} tools, {args.per_start} per start tool: speed",
               competitor="DFS capped at the same paths per start tool (what an engineer would write)",
               ours=f"{n / t_core:,.0f} chains/s", theirs=f"{n_capped / t_capped:,.0f} paths/s",
               ratio=f"{speed_capped:.2f}x")  # fmt: skip
    report.add(what="  same chains: edges used / prefix-nested siblings / mean edge weight (graph mean "
               f"{q_ours['graph_weight']:.2f})", competitor="capped DFS",
               ours=f"{q_ours['edges']:.0%} / {q_ours['nested']:.0%} / {q_ours['weight']:.2f}",
               theirs=f"{q_capped['edges']:.0%} / {q_capped['nested']:.0%} / {q_capped['weight']:.2f}", ratio="-")  # fmt: skip
    report.add(what="tool chains: time to cover every start tool", competitor="full DFS (ASTRA's released script: every path, no cap)",
               ours=f"{t_sample:.2f} s", theirs=f"{full_time:,.0f} s ({'measured' if finished else 'extrapolated'})",
               ratio=f"{full_time / t_sample:,.0f}x")  # fmt: skip
    report.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
