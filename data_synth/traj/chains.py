"""Tool chains by weighted random walks over a server's graph (docs/method.md §1.2).

The released scripts enumerate every path by DFS, cycles allowed, no cap: the count grows like
(out-degree)^length (`bench/chains.py` measures it). Here, for every start node with an
out-edge, up to `per_start` distinct chains are drawn:

1. draw a target length uniformly from `min_len..max_len`;
2. walk from the start, each step to an unvisited successor chosen with probability
   proportional to the edge weight (acyclic: a tool appears at most once in a chain);
3. stop at the target length or at a dead end; keep the chain when it has `>= min_len` tools
   and was not drawn before (de-duplicated per server).

Each start node gets `per_start * attempts_factor` walks at most, so a small neighbourhood that
cannot yield `per_start` distinct chains ends instead of looping. Every start node has its own
RNG seeded from `(seed, server_id, start)`: the output is deterministic per seed and does not
depend on node order or on which other servers run.
"""

from __future__ import annotations

import bisect
import hashlib
import random
from collections.abc import Hashable, Iterable, Sequence

import networkx as nx
from pydantic import model_validator

from astra_foundation.strict import StrictModel
from data_synth.traj.records import Chain


class ChainConfig(StrictModel):
    section = "chains"

    min_len: int = 2
    max_len: int = 5
    per_start: int = 3
    attempts_factor: int = 4
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> ChainConfig:
        if not 2 <= self.min_len <= self.max_len:
            raise ValueError(f"chain lengths must satisfy 2 <= min_len <= max_len, got {self.min_len}..{self.max_len}")
        if self.per_start < 1 or self.attempts_factor < 1:
            raise ValueError("per_start and attempts_factor must be >= 1")
        return self


class WalkGraph:
    """A graph compiled for fast weighted steps: successor lists and cumulative weights.

    Edges with weight <= 0 are left out (they could never be drawn)."""

    def __init__(self, nodes: Iterable[Hashable], edges: Iterable[tuple[Hashable, Hashable, float]]):
        self.nodes = list(nodes)
        index = {n: i for i, n in enumerate(self.nodes)}
        succ: list[list[int]] = [[] for _ in self.nodes]
        wts: list[list[float]] = [[] for _ in self.nodes]
        for a, b, w in edges:
            if w > 0 and a != b:
                succ[index[a]].append(index[b])
                wts[index[a]].append(float(w))
        self.succ = succ
        self.weights = wts
        self.cum = [[sum(w[: i + 1]) for i in range(len(w))] for w in wts]

    @classmethod
    def from_nx(cls, g: nx.DiGraph, weight: str = "weight") -> WalkGraph:
        return cls(g.nodes, ((a, b, d.get(weight, 1.0)) for a, b, d in g.edges(data=True)))

    def _step(self, node: int, visited: set[int], rng: random.Random) -> int | None:
        succ, cum = self.succ[node], self.cum[node]
        if not succ:
            return None
        # Rejection first: cheap when few successors are visited, the common case.
        for _ in range(4):
            j = succ[bisect.bisect_right(cum, rng.random() * cum[-1])]
            if j not in visited:
                return j
        free = [(j, w) for j, w in zip(succ, self.weights[node], strict=True) if j not in visited]
        if not free:
            return None
        total = sum(w for _, w in free)
        r, acc = rng.random() * total, 0.0
        for j, w in free:
            acc += w
            if r < acc:
                return j
        return free[-1][0]

    def walks_from(self, start: int, cfg: ChainConfig, rng: random.Random) -> list[tuple[int, ...]]:
        """Up to `cfg.per_start` distinct acyclic walks from `start` (rules 1-3 above)."""
        out: list[tuple[int, ...]] = []
        seen: set[tuple[int, ...]] = set()
        for _ in range(cfg.per_start * cfg.attempts_factor):
            target = rng.randint(cfg.min_len, cfg.max_len)
            path, visited = [start], {start}
            while len(path) < target:
                nxt = self._step(path[-1], visited, rng)
                if nxt is None:
                    break
                path.append(nxt)
                visited.add(nxt)
            walk = tuple(path)
            if len(walk) >= cfg.min_len and walk not in seen:
                seen.add(walk)
                out.append(walk)
                if len(out) >= cfg.per_start:
                    break
        return out

    def path_weight(self, walk: Sequence[int]) -> float:
        w = 1.0
        for a, b in zip(walk, walk[1:], strict=False):
            w *= self.weights[a][self.succ[a].index(b)]
        return w


def start_rng(seed: int, server_id: str, start: str) -> random.Random:
    digest = hashlib.sha256(f"{seed}\x00{server_id}\x00{start}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def sample_chains(g: nx.DiGraph | WalkGraph, server_id: str, cfg: ChainConfig | None = None) -> list[Chain]:
    """All chains of one server, grouped by start node in node order, each group in draw order."""
    cfg = cfg or ChainConfig()
    wg = g if isinstance(g, WalkGraph) else WalkGraph.from_nx(g)
    chains: list[Chain] = []
    # Walks from different start nodes differ in their first tool, so de-duplicating within
    # `walks_from` de-duplicates the whole server.
    for start in range(len(wg.nodes)):
        if not wg.succ[start]:
            continue
        for walk in wg.walks_from(start, cfg, start_rng(cfg.seed, server_id, str(wg.nodes[start]))):
            chains.append(Chain.create(server_id, [str(wg.nodes[i]) for i in walk], round(wg.path_weight(walk), 6)))
    return chains
