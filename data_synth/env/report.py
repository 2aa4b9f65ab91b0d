"""The environment-synthesis run report (`report/report.md`, plots in `report/plots/`): funnel,
rejection reasons, and what was built."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from data_synth.env.records import Merged, Scored, Selected
from data_synth.pipeline import Funnel, read_envelopes, read_outputs
from data_synth.report import Report
from env_registry.spec import EnvSpec

STEPS = ["env.decompose", "env.necessity", "env.verify", "env.select", "env.tools", "env.merge", "env.publish"]


def count_seeds(run_dir: Path) -> int | None:
    path = run_dir / "seeds.jsonl"
    if not path.exists():
        return None
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def env_funnel(run_dir: str | Path) -> Funnel:
    run_dir = Path(run_dir)
    return Funnel.from_run(run_dir, STEPS, first_inputs=count_seeds(run_dir))


def write_env_report(run_dir: str | Path) -> Path:
    """The environment-synthesis report: funnel, then one section per quality measure, each a table
    and a plot. Over 60 lines because it lists the sections in the order the report shows them;
    each section is a few calls on `Report`."""
    run_dir = Path(run_dir)
    funnel = env_funnel(run_dir)
    funnel.save(run_dir / "funnel.json")
    report = Report("Environment synthesis", run_dir / "report", plot_dir="plots")
    report.text(f"Run directory: `{run_dir.resolve()}`")
    report.funnel(funnel)
    report.rejections(funnel)

    envs = [EnvSpec.model_validate(m.env) for m in read_outputs(run_dir, "env.merge", Merged)]
    report.hist(
        "hops",
        [len(e.sub_questions) for e in envs],
        title="Sub-questions (hops) per environment",
        xlabel="sub-questions",
        integer=True,
    )
    report.bar("scenario_types", Counter(e.scenario_type.value for e in envs), title="Scenario types")
    report.hist("tools", [len(e.tools) for e in envs], title="Tools per environment", xlabel="tools", integer=True)
    report.bar("domains", Counter(e.domain for e in envs), title="Domains (top 25)")
    subs = [q for e in envs for q in e.sub_questions]
    if subs:
        share = sum(q.needs_tool for q in subs) / len(subs)
        report.text(
            f"{len(envs)} environments, {len(subs)} sub-questions ({100 * share:.1f}% need a tool), "
            f"{sum(len(e.tools) for e in envs)} tools, "
            f"{sum(len(t.golden_calls) for e in envs for t in e.tools)} golden calls."
        )

    scored = read_outputs(run_dir, "env.verify", Scored)
    selected = read_outputs(run_dir, "env.select", Selected)
    threshold = selected[0].threshold if selected else None
    report.hist(
        "quality",
        [s.quality for s in scored],
        title="Verification quality (mean of four judges)",
        xlabel="quality",
        span=(0, 1),  # a score in [0, 1]: one value alone would otherwise get an axis of v +- 0.5
        vline=threshold,
        vline_label=f"threshold {threshold:.3f}" if threshold is not None else "",
    )
    usage = [
        (
            c.step,
            c.usage.completions,
            c.usage.cache_hits,
            c.usage.retries,
            c.usage.prompt_tokens,
            c.usage.completion_tokens,
        )
        for c in funnel.steps
        if c.usage.completions
    ]
    if usage:
        report.text("## LLM usage")
        report.table(["step", "completions", "cache hits", "retries", "prompt tokens", "completion tokens"], usage)
    errors = [e for step in STEPS for e in read_envelopes(run_dir, step).values() if e.status == "error"]
    if errors:
        report.text(f"## Errors ({len(errors)}; a rerun retries them)")
        report.table(["step", "key", "reason"], [(e.step, e.key, e.reason) for e in errors[:20]])
    return report.write()
