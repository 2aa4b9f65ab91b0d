"""Chain sampling (data_synth.traj.chains) vs exhaustive DFS enumeration (ASTRA's released script).

The baseline is written here from the script's described behaviour: from every tool, a DFS
emits every path of 2..max_len tools, no cap, no sampling, cycles allowed (a tool may repeat;
no self-loops, as the graphs have none). The sampler draws up to `per_start` distinct acyclic
weighted walks per start tool.

A synthetic corpus like ASTRA's (default 20,000 tools in servers of ~12 tools with a long
tail, as 19,036 tools / 1,585 servers in the paper); per-server graphs with log-normal
out-degrees (median 3) plus a few hub tools (login-like, linked to half their server).

Printed:
1. throughput at equal output size: the sampler's chains/s over the whole corpus vs the DFS's
   paths/s for the first N paths it emits (same N);
2. the enumeration's size per length, exact (a dynamic-programming walk count, no enumeration),
   and the DFS's run time to finish, capped at `--dfs-cap-s` and **extrapolated** from its
   measured rate past the cap (labelled);
3. ratios.

    .venv/bin/python bench/chains.py [--tools 20000] [--max-len 5] [--per-start 3] [--dfs-cap-s 15]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data_synth.traj.chains import ChainConfig, WalkGraph, sample_chains, start_rng  # noqa: E402


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tools", type=int, default=20_000)
    ap.add_argument("--max-len", type=int, default=5)
    ap.add_argument("--per-start", type=int, default=3)
    ap.add_argument("--dfs-cap-s", type=float, default=15.0, help="wall-clock cap of the full DFS run")
    ap.add_argument("--blowup-to", type=int, default=8, help="report exact path counts up to this length")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    graphs = synthetic_corpus(args.tools, args.seed)
    n_edges = sum(len(s) for g in graphs for s in g.succ)
    print(
        f"corpus: {args.tools} tools in {len(graphs)} servers, {n_edges} edges "
        f"(mean out-degree {n_edges / args.tools:.2f}, max {max(len(s) for g in graphs for s in g.succ)})"
    )

    cfg = ChainConfig(min_len=2, max_len=args.max_len, per_start=args.per_start, seed=args.seed)
    t0 = time.perf_counter()
    core = 0
    for i, g in enumerate(graphs):
        for start in range(len(g.nodes)):
            if g.succ[start]:
                for walk in g.walks_from(start, cfg, start_rng(cfg.seed, f"s{i}", g.nodes[start])):
                    core += len([g.nodes[j] for j in walk]) > 0
    t_core = time.perf_counter() - t0
    t0 = time.perf_counter()
    sampled = [c for i, g in enumerate(graphs) for c in sample_chains(g, f"s{i}", cfg)]
    t_sample = time.perf_counter() - t0
    n = len(sampled)
    assert core == n
    starts = sum(1 for g in graphs for s in g.succ if s)
    print(f"\n[sampler] {n} chains (cap {args.per_start}/start, {starts} start tools; acyclic, de-duplicated)")
    print(f"          walks as name lists (like the DFS's output): {t_core:.2f} s = {n / t_core:,.0f} chains/s")
    print(f"          as `Chain` records (ids, weights):           {t_sample:.2f} s = {n / t_sample:,.0f} chains/s")

    _, emitted, t_eq, _ = dfs_enumerate(graphs, args.max_len, limit=n, cap_s=math.inf)
    print(
        f"[dfs]     first {emitted} paths (equal output size) in {t_eq:.2f} s = {emitted / t_eq:,.0f} paths/s "
        f"(these cover only the first servers of the corpus)"
    )

    counts = walk_counts(graphs, max(args.max_len, args.blowup_to))
    total = sum(c for L, c in counts.items() if L <= args.max_len)
    _, done, t_full, finished = dfs_enumerate(graphs, args.max_len, limit=None, cap_s=args.dfs_cap_s)
    rate = done / t_full
    print(f"[dfs]     full enumeration to length {args.max_len}: {total:,} paths (exact count)")
    if finished:
        print(f"          ran to completion in {t_full:.1f} s ({rate:,.0f} paths/s), measured")
    else:
        print(
            f"          stopped at the {args.dfs_cap_s:.0f} s cap after {done:,} paths ({rate:,.0f} paths/s); "
            f"EXTRAPOLATED time to finish: {total / rate:,.0f} s"
        )

    print("\npaths per length (exact DP count of what the DFS enumerates; time EXTRAPOLATED at the measured DFS rate)")
    print(f"{'len':>4} {'dfs paths':>16} {'dfs time (s)':>14} {'sampled chains':>15}")
    per_len = {L: sum(1 for c in sampled if len(c.tools) == L) for L in counts}
    for L, c in counts.items():
        s = str(per_len[L]) if L <= args.max_len else "-"
        print(f"{L:>4} {c:>16,} {c / rate:>14,.1f} {s:>15}")
    growth = [counts[L + 1] / counts[L] for L in counts if L + 1 in counts and counts[L]]
    print(f"growth factor per extra tool: {min(growth):.2f}..{max(growth):.2f}")

    print("\nratios")
    print(
        f"  throughput at equal output size (sampler walks/s / dfs paths/s): {(n / t_core) / (emitted / t_eq):.2f}x "
        "(a DFS step is cheaper than a weighted draw; the DFS's first N paths cover only a few servers)"
    )
    print(f"  output size to cover every start tool (dfs paths / sampled chains): {total / n:,.0f}x")
    print(
        f"  time to cover every start tool (dfs {'measured' if finished else 'extrapolated'} / sampler records): "
        f"{(t_full if finished else total / rate) / t_sample:,.0f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
