"""`python -m env_registry stats`: counts per domain, scenario type, hops and tools per environment."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

import networkx as nx
from tqdm.auto import tqdm

from env_registry.answer_stats import AnswerCounts
from env_registry.commands.common import open_store, say, table
from env_registry.shape import STRUCTURE_SAMPLE, shape_of, structure_of, tool_api


def cmd_stats(args: argparse.Namespace) -> int:
    store = open_store(args)
    domains, types, variants, hops, subs, tools = (Counter() for _ in range(6))  # variants: issue 49
    calls = needs_tool = n_subs = 0
    names: set[str] = set()
    apis: set[str] = set()
    structures: set[str] = set()  # of the first STRUCTURE_SAMPLE environments, so stores compare
    answers = AnswerCounts()
    for i, env in enumerate(tqdm(store, total=len(store), desc="stats", unit="env", disable=args.quiet)):
        if i < STRUCTURE_SAMPLE:
            structures.add(structure_of(env))
        apis.update(tool_api(t) for t in env.tools)
        domains[env.domain] += 1
        types[env.scenario_type.value] += 1
        variants[env.variant.value] += 1
        try:
            hops[shape_of(env).hops] += 1
        except nx.NetworkXUnfeasible:  # its trace has a cycle (validation rejects those; a store may hold them)
            hops["cyclic"] += 1
        subs[len(env.sub_questions)] += 1
        tools[len(env.tools)] += 1
        calls += sum(len(t.golden_calls) for t in env.tools)
        needs_tool += sum(q.needs_tool for q in env.sub_questions)
        n_subs += len(env.sub_questions)
        names.update(t.name for t in env.tools)
        answers.add(env)
    n = len(store)
    summary = {
        "environments": n,
        "sub_questions_mean": n_subs / max(n, 1),
        "needs_tool_share": needs_tool / max(n_subs, 1),
        "golden_calls_mean": calls / max(n, 1),
        "distinct_tool_names": len(names),
        "distinct_tool_apis": len(apis),
        "one_tool_share": tools[1] / max(n, 1),
        "distinct_structures": len(structures),
        "structure_sample": min(n, STRUCTURE_SAMPLE),
        "domains": dict(domains),
        "scenario_types": dict(types),
        "variants": dict(variants),
        "hops": {str(k): v for k, v in hops.items()},
        "sub_questions": {str(k): v for k, v in subs.items()},
        "tools_per_env": {str(k): v for k, v in tools.items()},
        **answers.summary(),
    }
    if args.json:
        say(json.dumps(summary, indent=2))
    else:
        counts = {"domains": domains, "scenario types": types, "variants": variants, "hops (longest tool chain)": hops}
        tables = {**counts, "sub-questions per env": subs, "tools per env": tools}
        _print_stats(args.store, summary, {**tables, "comparison winner's listed position": answers.winners})
    if args.plot:
        _plot(args.plot, {"domain": domains, "scenario type": types, "hops": hops, "tools per env": tools}, n)
        say(f"plot: {args.plot}")
    return 0


def _print_stats(store: str, s: dict[str, Any], tables: dict[str, Counter]) -> None:
    n = s["environments"]
    say(f"{n} environments in {store}")
    say(
        f"  {s['sub_questions_mean']:.2f} sub-questions per env ({100 * s['needs_tool_share']:.1f}% need a tool), "
        f"{s['golden_calls_mean']:.2f} golden calls per env, {s['distinct_tool_names']} distinct tool names"
    )
    say(
        f"  {s['distinct_structures']} distinct structures in the first {s['structure_sample']} environments, "
        f"{s['distinct_tool_apis']} distinct tool APIs, {100 * s['one_tool_share']:.1f}% of environments with one tool"
    )
    say(
        f"  {s['echo_answer_sub_questions']} sub-questions whose answer echoes a golden-call argument "
        "(rewarded only for the golden call itself)"
    )
    for title, counts in tables.items():
        table(title, counts, n)


def _plot(path: str, panels: dict[str, Counter], n: int) -> None:
    # Lazy: matplotlib is heavy to import and only `stats --plot` draws.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for ax, (title, counts) in zip(axes.flat, panels.items(), strict=True):
        keys = sorted(counts, key=lambda k: (isinstance(k, str), k))
        ax.bar([str(k) for k in keys], [counts[k] for k in keys], color="#4C72B0")
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=30)
    fig.suptitle(f"{n} environments")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
