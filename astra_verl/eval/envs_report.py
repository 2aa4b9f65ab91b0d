"""The table and the plot of an `eval envs` run (pure summaries of `EnvEpisode` records).

Per group of episodes (all, then by domain, scenario type, hop count and variant):

    F1        mean trajectory F1, ± its standard error over rows (a row's samples averaged first:
              the row is the unit that was drawn; with one sample per row this is the plain SE; one row:
              "no SE", `astra_foundation.stats`)
    solved    solved sub-questions / sub-questions
    turns     assistant turns per episode
    calls     tool calls per episode (every attempt, invalid ones included)
    invalid   invalid calls / calls (unknown tool, malformed, schema violation)
    distr.    calls to distractor tools / calls
    answer    share of episodes whose final answer contains the main answer (reported, not rewarded)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from astra_foundation.stats import format_mean_se, mean_se
from astra_verl.eval import plotting
from astra_verl.eval.envs import EnvEpisode  # noqa: E402

BREAKDOWNS: dict[str, Callable[[EnvEpisode], str]] = {
    "domain": lambda e: e.domain,
    "scenario type": lambda e: e.scenario_type,
    "hops": lambda e: str(e.hops),
    # what a model does where calling is not the answer: asking, declining, answering directly
    "variant": lambda e: e.variant,
}


@dataclass(frozen=True)
class GroupScore:
    name: str
    rows: int
    episodes: int
    f1: float
    f1_se: float
    solved_rate: float
    turns: float
    calls: float
    invalid_rate: float
    distractor_rate: float
    answer_rate: float


def score_group(name: str, episodes: Sequence[EnvEpisode]) -> GroupScore:
    by_row: dict[int, list[float]] = defaultdict(list)
    for e in episodes:
        by_row[e.row].append(e.f1)
    f1, se = mean_se([sum(v) / len(v) for v in by_row.values()])
    calls = sum(e.calls for e in episodes)
    count = max(1, len(episodes))
    return GroupScore(
        name=name,
        rows=len(by_row),
        episodes=len(episodes),
        f1=f1,
        f1_se=se,
        solved_rate=sum(e.solved for e in episodes) / max(1, sum(e.n for e in episodes)),
        turns=sum(e.turns for e in episodes) / count,
        calls=calls / count,
        invalid_rate=sum(e.invalid_calls for e in episodes) / calls if calls else 0.0,
        distractor_rate=sum(e.distractor_calls for e in episodes) / calls if calls else 0.0,
        answer_rate=sum(e.final_answer_correct for e in episodes) / count,
    )


def summarize(episodes: Iterable[EnvEpisode]) -> dict[str, list[GroupScore]]:
    """{"all": [one group], <breakdown>: [a group per value, sorted]}."""
    episodes = list(episodes)
    out = {"all": [score_group("all", episodes)]}
    for title, key in BREAKDOWNS.items():
        groups: dict[str, list[EnvEpisode]] = defaultdict(list)
        for e in episodes:
            groups[key(e)].append(e)
        out[title] = [score_group(k, groups[k]) for k in sorted(groups, key=lambda k: (len(k), k))]
    return out


HEADER = f"{'':<22} {'rows':>5} {'F1':>13} {'solved':>7} {'turns':>6} {'calls':>6} {'invalid':>8} {'distr.':>7} {'answer':>7}"


def format_row(g: GroupScore) -> str:
    f1 = format_mean_se((g.f1, g.f1_se), sep="±")  # one row: "(no SE)"
    return (
        f"{g.name:<22} {g.rows:>5} {f1:>13} {g.solved_rate:>7.3f} {g.turns:>6.2f} {g.calls:>6.2f} "
        f"{g.invalid_rate:>8.3f} {g.distractor_rate:>7.3f} {g.answer_rate:>7.3f}"
    )


def format_table(summary: dict[str, list[GroupScore]], title: str) -> str:
    lines = [title, HEADER, format_row(summary["all"][0])]
    for breakdown in BREAKDOWNS:
        lines.append(f"by {breakdown}:")
        lines += ["  " + format_row(g) for g in summary[breakdown]]
    return "\n".join(lines)


def plot(summary: dict[str, list[GroupScore]], title: str, path: Path) -> Path:
    """F1 (± SE) per group of each breakdown, with the invalid-call rate beside it."""
    plt = plotting.pyplot()
    fig, axes = plt.subplots(1, len(BREAKDOWNS), figsize=(5 * len(BREAKDOWNS), 3.8), squeeze=False)
    for ax, breakdown in zip(axes[0], BREAKDOWNS, strict=True):
        groups = summary[breakdown]
        xs = range(len(groups))
        se = [0.0 if math.isnan(g.f1_se) else g.f1_se for g in groups]  # one row: no error bar
        ax.bar([x - 0.2 for x in xs], [g.f1 for g in groups], 0.4, yerr=se, label="F1")
        ax.bar([x + 0.2 for x in xs], [g.invalid_rate for g in groups], 0.4, label="invalid-call rate")
        ax.set_xticks(list(xs), [f"{g.name}\n(n={g.rows})" for g in groups], fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_title(f"by {breakdown}")
    axes[0][0].legend(fontsize=8)
    top = summary["all"][0]
    fig.suptitle(f"{title}: F1 {format_mean_se((top.f1, top.f1_se))}")
    return plotting.save(fig, path)
