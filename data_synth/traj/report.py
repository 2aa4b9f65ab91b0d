"""The run report: `report.md` with the funnel and what was kept, plus plots in `plots/`.

Plots (PNG): judge scores of every judged trajectory (kept and rejected), mean score per
judge dimension of the kept ones, tool calls per kept trajectory, lengths of sampled and
verified chains.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from data_synth.pipeline import Funnel, read_envelopes, read_outputs
from data_synth.traj.judge import DIMENSIONS
from data_synth.traj.records import Chain, JudgedTrajectory, VerifiedChain


def judge_scores(run_dir: str | Path) -> tuple[list[float], list[float]]:
    """(scores of kept, scores of rejected-below-threshold) trajectories."""
    kept, low = [], []
    for env in read_envelopes(run_dir, "traj.judge").values():
        if env.status == "ok":
            kept.append(float(env.out[0]["judgement"]["score"]))
        elif env.reason == "below_judge_threshold" and env.detail:
            low.append(float(json.loads(env.detail)["score"]))
    return kept, low


def _plots(run_dir: Path, kept: list[JudgedTrajectory]) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = run_dir / "plots"
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []

    ok, low = judge_scores(run_dir)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.hist(
        [ok, low],
        bins=20,
        range=(0, 1),
        stacked=True,
        label=["kept", "below threshold"],
        color=["tab:green", "tab:red"],
    )
    ax.set_xlabel("judge score (mean of 7 dimensions)")
    ax.set_ylabel("trajectories")
    ax.legend()
    paths.append(out_dir / "judge_scores.png")
    fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
    plt.close(fig)

    if kept:
        means = [sum(k.judgement.scores[d] for k in kept) / len(kept) for d in DIMENSIONS]
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.barh([d.replace("_", " ") for d in DIMENSIONS], means, color="tab:blue")
        ax.set_xlim(0, 1)
        ax.set_xlabel("mean score of kept trajectories")
        paths.append(out_dir / "judge_dimensions.png")
        fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)

        calls = Counter(len(k.trajectory.calls) for k in kept)
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar(list(calls), list(calls.values()), color="tab:purple")
        ax.set_xlabel("tool calls per kept trajectory")
        ax.set_ylabel("trajectories")
        paths.append(out_dir / "tool_calls.png")
        fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)

    sampled = Counter(len(c.tools) for c in read_outputs(run_dir, "traj.chains", Chain))
    verified = Counter(len(c.tools) for c in read_outputs(run_dir, "traj.verify", VerifiedChain))
    if sampled:
        lengths = sorted(sampled)
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.bar([x - 0.2 for x in lengths], [sampled[x] for x in lengths], width=0.4, label="sampled")
        ax.bar([x + 0.2 for x in lengths], [verified.get(x, 0) for x in lengths], width=0.4, label="verified")
        ax.set_xlabel("chain length (tools)")
        ax.set_ylabel("chains")
        ax.legend()
        paths.append(out_dir / "chain_lengths.png")
        fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
        plt.close(fig)
    return paths


def write_report(run_dir: str | Path, funnel: Funnel, kept: list[JudgedTrajectory]) -> Path:
    run_dir = Path(run_dir)
    plots = _plots(run_dir, kept)
    n_msgs = sum(len(k.trajectory.messages) for k in kept)
    n_calls = sum(len(k.trajectory.calls) for k in kept)
    tools = {(k.trajectory.server_id, c.name) for k in kept for c in k.trajectory.calls}
    lines = [
        "# Trajectory synthesis report",
        "",
        "## Funnel",
        "",
        "```",
        funnel.table(),
        "```",
        "",
        "## Kept trajectories",
        "",
        f"- conversations: {len(kept)}",
        f"- messages per conversation: {n_msgs / len(kept):.1f}" if kept else "- messages per conversation: -",
        f"- tool calls per conversation: {n_calls / len(kept):.1f}" if kept else "- tool calls per conversation: -",
        f"- distinct tools called: {len(tools)}",
        "",
        "## Plots",
        "",
        *[f"![{p.stem}](plots/{p.name})" for p in plots],
        "",
    ]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
