"""The single-turn table: BFCL's per-category accuracy and its aggregates, with standard errors.

Per category: valid / entries run (an error record counts as a failure), ± the standard error
over entries, sqrt(p(1-p)/n).

Aggregates, as bfcl-eval's `generate_leaderboard_csv` computes them (eval_runner_helper.py):
- Non-Live Simple: the unweighted mean of simple_python, simple_java, simple_javascript;
- Non-Live overall: the unweighted mean of Simple, multiple, parallel, parallel_multiple;
- Live overall: the mean of live_simple, live_multiple, live_parallel, live_parallel_multiple
  weighted by each category's entry count (`calculate_weighted_accuracy`); the weights are
  BFCL's full category sizes, so a sampled run estimates the same number (on a full run they
  are the entries run, exactly as BFCL);
- Irrelevance: the unweighted mean of irrelevance and live_irrelevance; Relevance: live_relevance.
BFCL counts a category it did not run as 0 in an aggregate; here an aggregate is computed over
the categories that ran and its row says how many of its members that is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from astra_verl.eval import plotting
from astra_verl.eval.bfcl_single import CATEGORIES, SingleResult

SIMPLE = ("simple_python", "simple_java", "simple_javascript")
NON_LIVE_AST = ("simple", "multiple", "parallel", "parallel_multiple")
LIVE_AST = ("live_simple", "live_multiple", "live_parallel", "live_parallel_multiple")
IRRELEVANCE = ("irrelevance", "live_irrelevance")


@dataclass
class Score:
    name: str
    accuracy: float
    se: float
    entries: int  # entries run (for an aggregate: of its members)
    valid: int = 0
    errors: int = 0
    members: str = ""  # aggregates: "k/n categories" when some did not run


def category_scores(records: Iterable[SingleResult]) -> dict[str, Score]:
    by_cat: dict[str, list[SingleResult]] = {}
    for r in records:
        by_cat.setdefault(r.category, []).append(r)
    out = {}
    for c in CATEGORIES:
        rs = by_cat.get(c)
        if not rs:
            continue
        n = len(rs)
        valid = sum(1 for r in rs if r.status == "scored" and r.valid)
        p = valid / n
        out[c] = Score(c, p, math.sqrt(p * (1 - p) / n), n, valid, sum(1 for r in rs if r.status == "error"))
    return out


def _unweighted(name: str, parts: Sequence[Score | None]) -> Score | None:
    ran = [p for p in parts if p is not None]
    if not ran:
        return None
    acc = sum(p.accuracy for p in ran) / len(ran)
    se = math.sqrt(sum(p.se**2 for p in ran)) / len(ran)
    members = "" if len(ran) == len(parts) else f"{len(ran)}/{len(parts)} categories"
    return Score(name, acc, se, sum(p.entries for p in ran), members=members)


def _weighted(name: str, parts: Sequence[Score | None], weights: Sequence[int]) -> Score | None:
    ran = [(p, w) for p, w in zip(parts, weights, strict=True) if p is not None]
    if not ran:
        return None
    total = sum(w for _, w in ran)
    acc = sum(p.accuracy * w for p, w in ran) / total
    se = math.sqrt(sum((p.se * w) ** 2 for p, w in ran)) / total
    members = "" if len(ran) == len(parts) else f"{len(ran)}/{len(parts)} categories"
    return Score(name, acc, se, sum(p.entries for p, _ in ran), members=members)


def aggregates(scores: Mapping[str, Score], size: Callable[[str], int]) -> list[Score]:
    """BFCL's single-turn aggregates over the categories in `scores`; `size(c)` is BFCL's entry
    count of category c (the live weights)."""
    simple = _unweighted("Non-Live Simple", [scores.get(c) for c in SIMPLE])
    rows = [
        simple,
        _unweighted(
            "Non-Live overall", [simple, *(scores.get(c) for c in ("multiple", "parallel", "parallel_multiple"))]
        ),
        _weighted("Live overall", [scores.get(c) for c in LIVE_AST], [size(c) for c in LIVE_AST]),
        _unweighted("Irrelevance", [scores.get(c) for c in IRRELEVANCE]),
        _unweighted("Relevance", [scores.get("live_relevance")]),
    ]
    return [r for r in rows if r is not None]


def format_table(scores: Mapping[str, Score], aggs: Sequence[Score], title: str) -> str:
    """Markdown: one row per category, then the aggregates (accuracy % ± SE)."""
    lines = [title, "", "| Category | Accuracy % | ± SE | Valid / entries |", "|---|---:|---:|---:|"]
    for c in CATEGORIES:
        s = scores.get(c)
        if s is not None:
            count = f"{s.valid}/{s.entries}" + (f" ({s.errors} err)" if s.errors else "")
            lines.append(f"| {c} | {100 * s.accuracy:.2f} | {100 * s.se:.2f} | {count} |")
    for a in aggs:
        note = f" ({a.members})" if a.members else ""
        lines.append(f"| **{a.name}**{note} | {100 * a.accuracy:.2f} | {100 * a.se:.2f} | {a.entries} |")
    return "\n".join(lines)


def format_causes(records: Iterable[SingleResult]) -> str:
    causes: dict[str, dict[str, int]] = {}
    for r in records:
        if r.status == "error":
            kind = "error: " + (r.error or "").split(":", 1)[0]
        elif not r.valid:
            kind = (r.verdict or {}).get("error_type") or "unknown"
        else:
            continue
        row = causes.setdefault(r.category, {})
        row[kind] = row.get(kind, 0) + 1
    if not causes:
        return "no failures"
    return "\n".join(
        f"{c}: " + ", ".join(f"{k} {v}" for k, v in sorted(causes[c].items(), key=lambda kv: -kv[1]))
        for c in CATEGORIES
        if c in causes
    )


def plot(scores: Mapping[str, Score], aggs: Sequence[Score], title: str, path: Path) -> Path:
    """Accuracy ± SE per category and aggregate, one horizontal bar each."""
    plt = plotting.pyplot()

    rows = [scores[c] for c in CATEGORIES if c in scores] + list(aggs)
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(rows) + 1.2))
    ys = range(len(rows))[::-1]
    colors = ["tab:blue"] * (len(rows) - len(aggs)) + ["tab:orange"] * len(aggs)
    ax.barh(list(ys), [r.accuracy for r in rows], xerr=[r.se for r in rows], color=colors)
    ax.set_yticks(list(ys), [f"{r.name} (n={r.entries})" for r in rows], fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("accuracy (± SE over entries)")
    ax.set_title(title, fontsize=9)
    return plotting.save(fig, path)
