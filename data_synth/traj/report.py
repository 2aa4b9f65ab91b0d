"""The run report: `report/report.md` with the funnel and what was kept, plus plots in `report/plots/`.

Built with the shared `data_synth.report.Report`: the funnel (table and plot), rejection and
error reasons, then the plots of this pipeline: judge scores of every judged trajectory (kept
and rejected), mean score per judge dimension of the kept ones, tool calls per kept
trajectory, lengths of sampled and verified chains.
"""

from __future__ import annotations

import json
from pathlib import Path

from data_synth.pipeline import Funnel, read_envelopes, read_outputs
from data_synth.report import Report
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


def _kept_summary(kept: list[JudgedTrajectory]) -> str:
    n = len(kept)
    n_msgs = sum(len(k.trajectory.messages) for k in kept)
    n_calls = sum(len(k.trajectory.calls) for k in kept)
    tools = {(k.trajectory.server_id, c.name) for k in kept for c in k.trajectory.calls}
    return "\n".join(
        [
            "## Kept trajectories",
            "",
            f"- conversations: {n}",
            f"- messages per conversation: {n_msgs / n:.1f}" if n else "- messages per conversation: -",
            f"- tool calls per conversation: {n_calls / n:.1f}" if n else "- tool calls per conversation: -",
            f"- distinct tools called: {len(tools)}",
        ]
    )


def write_report(run_dir: str | Path, funnel: Funnel, kept: list[JudgedTrajectory], *, threshold: float) -> Path:
    """The report; `threshold` is the judge's keep threshold, drawn on the score histogram."""
    run_dir = Path(run_dir)
    report = Report("Trajectory synthesis report", run_dir / "report", plot_dir="plots")
    report.text(f"Run directory: `{run_dir.resolve()}`")
    report.funnel(funnel)
    report.rejections(funnel)
    report.text(_kept_summary(kept))

    ok, low = judge_scores(run_dir)
    report.hist(
        "judge_scores",
        {"kept": ok, "below threshold": low},
        title="Judge scores",
        xlabel=f"judge score (mean of {len(DIMENSIONS)} dimensions)",
        span=(0, 1),
        stacked=True,
        vline=threshold,
        vline_label=f"threshold {threshold:g}",
    )
    means = (
        {d.replace("_", " "): sum(k.judgement.scores[d] for k in kept) / len(kept) for d in DIMENSIONS} if kept else {}
    )
    report.bar(
        "judge_dimensions",
        means,
        title="Judge dimensions (kept trajectories)",
        xlabel="mean score",
        sort=False,
        xlim=(0, 1),
    )
    report.hist(
        "tool_calls",
        [len(k.trajectory.calls) for k in kept],
        title="Tool calls per kept trajectory",
        xlabel="tool calls",
        integer=True,
    )
    report.hist(
        "chain_lengths",
        {
            "sampled": [len(c.tools) for c in read_outputs(run_dir, "traj.chains", Chain)],
            "verified": [len(c.tools) for c in read_outputs(run_dir, "traj.verify", VerifiedChain)],
        },
        title="Chain lengths",
        xlabel="chain length (tools)",
        integer=True,
        colors=("#4c72b0", "#55a868"),
    )
    return report.write()
