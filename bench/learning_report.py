"""bench/learning.py's report: `<out>/learning.md` (the table, the verdicts, settings, machine and
stage times), `learning.json` and `learning.png`.
"""

from __future__ import annotations

import json
import math
import os
import platform
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from learning_logs import COLUMNS, LABELS  # noqa: E402
from learning_stages import Tier  # noqa: E402
from learning_stats import SeedRun, aggregate, measured, rise, row_rise  # noqa: E402

from astra_foundation.stats import format_mean_se, mean_se  # noqa: E402


def machine() -> str:
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{platform.node()}: {os.cpu_count()} CPUs ({model}), load average {load}, Python {platform.python_version()}"
    )


def verdicts(tier: Tier, runs: Sequence[SeedRun]) -> list[str]:
    validated = set.intersection(*(set(r.steps) for r in runs))
    last = str(max(validated))
    lines = []

    def verdict(what: str, column: str, start: str, end: str, target: float = 0.0) -> None:
        split = {"train_greedy": "train"}.get(column, column)
        if column == "train_T" and start == end:  # a window compared with itself says nothing
            lines.append(f"- {what}: n/a (one sampled window: needs --grpo-steps beyond --test-freq)")
            return
        if len(runs) >= 2 or column == "train_T":
            mean, se = rise(runs, column, start, end)
            over = f"{len(runs)} seeds"
        else:  # one seed: the SE over environments, paired (each environment before and after)
            mean, se, n = row_rise(runs[0], split, start, end)
            over = f"{n} {split} environments, seed {runs[0].seed}"
        if math.isnan(mean):
            lines.append(f"- {what}: n/a (nothing measured at both points over {over})")
            return
        if math.isnan(se):  # nothing to judge against: say why instead of printing "± nan: MISSED"
            lines.append(f"- {what}: {mean:+.3f}, n/a (no standard error over {over}: needs 2 or more)")
            return
        ok = mean > 2 * se and mean >= target
        want = f">= {target} and " if target else ""
        lines.append(f"- {what}: {mean:+.3f} ± {se:.3f} over {over} (target {want}> 2 SE): {'met' if ok else 'MISSED'}")

    sft_target = 0.3 if tier.model != "tiny" else 0.0
    if validated == {0}:  # --grpo-steps 0: SFT only, nothing of GRPO to judge
        verdict("SFT, held-out data F1, base -> after SFT", "heldout_data", "base", "0", sft_target)
        verdict("SFT, held-out shape F1, base -> after SFT", "heldout_shape", "base", "0")
        return lines
    first = str(min(s for s in validated if s > 0))
    verdict(f"GRPO, train reward (greedy), step 0 -> {last}", "train_greedy", "0", last)
    verdict(f"GRPO, train reward (T), steps 1-{first} -> the {tier.test_freq} before {last}", "train_T", first, last)
    verdict("SFT, held-out data F1, base -> step 0", "heldout_data", "base", "0", sft_target)
    verdict(f"GRPO, held-out data F1, step 0 -> {last}", "heldout_data", "0", last)
    verdict("SFT, held-out shape F1, base -> step 0", "heldout_shape", "base", "0")
    return lines


def stage_times(tier: Tier, runs: Sequence[SeedRun]) -> list[str]:
    """Each stage's seconds per seed (mean ± SE), the stages this run had."""

    def seconds(key: str, spec: str = ".0f") -> str:
        return format_mean_se(mean_se(measured([r.seconds[key] for r in runs])), spec)

    parts = [f"SFT {seconds('sft')} s (median {seconds('sft_step', '.2f')} s/step)"]
    if tier.grpo_steps:
        parts.append(
            f"GRPO {seconds('grpo')} s (median {seconds('grpo_step', '.2f')} s/step; start-up and validations on top)"
        )
    parts.append(f"base-model evaluation {seconds('base_eval')} s")
    if not tier.grpo_steps:
        parts.append(f"SFT-checkpoint evaluation {seconds('sft_eval')} s")
    return parts


def write_report(tier: Tier, runs: Sequence[SeedRun], out: Path, wall_s: float, argv: Sequence[str]) -> Path:
    table = aggregate(runs)
    lines = [
        f"# Learning benchmark, tier `{tier.name}` ({tier.model} model), {len(runs)} seeds",
        "",
        f"`{' '.join(['.venv/bin/python', 'bench/learning.py', *argv])}`",
        "",
        "| after | " + " | ".join(LABELS[c] for c in COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]
    for name, cells in table.items():
        after_sft = "SFT (GRPO step 0)" if tier.grpo_steps else "SFT (eval envs, greedy)"
        label = {"base": "base model", "step 0": after_sft}.get(name, f"GRPO {name}")
        lines.append(f"| {label} | " + " | ".join(format_mean_se(cells[c]) for c in COLUMNS) + " |")
    lines += ["", "Mean ± standard error over seeds " + ", ".join(str(r.seed) for r in runs) + "."]
    lines += ["", "## Verdicts", "", *verdicts(tier, runs)]
    lines += [
        "",
        "## Settings, machine, time",
        "",
        "- splits: "
        + "; ".join(f"{s.name} {s.envs} envs (seed {s.seed}, {', '.join(s.scenario_types)})" for s in tier.splits),
        f"- SFT: {tier.sft_steps} steps, lr {tier.sft_lr}, batch {tier.sft_batch}, recovery share {tier.recovery_share}; "
        f"loss {sum(r.sft_loss[0] for r in runs) / len(runs):.2f} -> {sum(r.sft_loss[1] for r in runs) / len(runs):.3f}",
        (
            f"- GRPO: {tier.grpo_steps} steps, lr {tier.grpo_lr}, temperature {tier.temperature}, batch "
            f"{tier.train_batch} prompts x n={tier.rollout_n}, validation every {tier.test_freq} steps (greedy)"
            if tier.grpo_steps
            else "- GRPO: not run (--grpo-steps 0); the SFT checkpoint scored by `python -m astra_verl.eval envs`, "
            "greedy, on every split"
        ),
        f"- {machine()}",
        f"- wall time of this invocation {wall_s / 60:.1f} min (a stage found finished in the run folder is "
        "reused, not rerun; the stage times are those recorded when each stage ran)",
        "- per seed: " + ", ".join(stage_times(tier, runs)),
    ]
    path = out / "learning.md"
    path.write_text("\n".join(lines) + "\n")
    (out / "learning.json").write_text(
        json.dumps({"tier": asdict(tier), "runs": [asdict(r) for r in runs], "wall_s": wall_s}, indent=1)
    )
    plot(tier, runs, table, out / "learning.png")
    return path


def plot(tier: Tier, runs: Sequence[SeedRun], table: dict, path: Path) -> None:
    steps = [int(k.split()[1]) for k in table if k != "base"]
    panels = (("train_greedy", "train_T"), ("heldout_data", "heldout_shape"), ("invalid_rate",), ("turns",))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6))
    for ax, columns in zip(axes, panels, strict=True):
        for c in columns:
            mean = [table[f"step {s}"][c][0] for s in steps]
            se = [table[f"step {s}"][c][1] for s in steps]
            line = ax.plot(steps, mean, marker="o", label=LABELS[c])[0]
            lo = [m - (e if not math.isnan(e) else 0) for m, e in zip(mean, se, strict=True)]
            hi = [m + (e if not math.isnan(e) else 0) for m, e in zip(mean, se, strict=True)]
            ax.fill_between(steps, lo, hi, alpha=0.2, color=line.get_color())
            base = table["base"][c][0]
            if not math.isnan(base):
                ax.scatter([-tier.test_freq / 2], [base], marker="x", color=line.get_color())
        ax.set_xlabel("GRPO step (x: base model, 0: after SFT)")
        ax.legend(fontsize=7)
        if columns[0] != "turns":
            ax.set_ylim(0, 1)
    fig.suptitle(f"learning benchmark, tier {tier.name} ({tier.model}), mean ± SE over {len(runs)} seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
