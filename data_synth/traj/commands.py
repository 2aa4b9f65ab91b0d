"""The steps of `python -m data_synth traj` (parsed by `data_synth.traj.cli`): check the command,
prepare the output folder, run the step(s), report what failed. Imported when a command runs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from astra_foundation.clikit import EXIT_OK, UsageError, run_async
from astra_foundation.llm import LLMConfig, LLMFlags, preflight
from astra_foundation.strict import SettingsError
from data_synth.pipeline import RunStats, Shard, read_envelopes, read_outputs
from data_synth.pipeline.manifest import file_digest
from data_synth.pipeline.run_options import (
    answered_by,
    check_run_dir,
    exit_status,
    failures,
    prepare_run_dir,
    step_settings,
)
from data_synth.pipeline.settings import apply_sets
from data_synth.traj.config import TrajConfig
from data_synth.traj.graph import plot_graph, write_graphml
from data_synth.traj.ingest import expand_paths
from data_synth.traj.records import GraphRecord, Server
from data_synth.traj.run import STEP_ORDER, ContextFactory, Runner

PIPELINE = "traj"
LLM_STEPS = {"graph", "verify", "tasks", "augment", "score", "variants", "interact", "judge", "run"}
READ_ONLY = {"funnel"}  # never create or change the run directory


# What decides each step's records (see data_synth.pipeline.manifest): its config sections and
# the role whose model answers it.
STEP_SETTINGS: dict[str, tuple[tuple[str, ...], str | None]] = {
    "traj.ingest": (("ingest",), None),
    "traj.graph": (("propose", "graph"), "llm"),
    "traj.chains": (("chains",), None),
    "traj.verify": (("verify",), "llm"),
    "traj.tasks": (("tasks",), "llm"),
    "traj.augment": (("tasks",), "llm"),
    "traj.score": (("tasks",), "llm"),
    "traj.variants": (("variants",), "llm"),
    "traj.interact": (("interact",), "agent"),
    "traj.judge": (("judge",), "judge"),
}


def _print_ingest_issues(run_dir: Path, limit: int = 20) -> None:
    """Rejected servers and dropped tools, each with file, record and reason."""
    lines = [
        f"rejected {k}: {e.reason}: {e.detail}"
        for k, e in sorted(read_envelopes(run_dir, "traj.ingest").items())
        if e.status != "ok"
    ]
    for s in read_outputs(run_dir, "traj.ingest", Server):
        lines += [f"dropped tool {s.source.file}#{s.source.record} {d.tool}: {d.reason}" for d in s.dropped_tools]
        lines += [f"warning {s.source.file}#{s.source.record}: {w}" for w in s.warnings]
    for line in lines[:limit]:
        print(line)
    if len(lines) > limit:
        print(f"... and {len(lines) - limit} more (see {run_dir}/traj.ingest.jsonl)")


def _unreadable_inputs(run_dir: Path) -> int:
    return sum(1 for e in read_envelopes(run_dir, "traj.ingest").values() if e.reason == "unreadable_file")


def _prefix(role: str) -> str:
    """The flags' prefix of a role: the synthesis model is the endpoint (`--base-url`)."""
    return "" if role == "llm" else role


def _llm_config(args: argparse.Namespace, role: str) -> LLMConfig | None:
    cfg = LLMConfig.from_args(args, _prefix(role))
    return cfg if (cfg.base_urls or cfg.scripted or cfg.responder) else None


def load_config(args: argparse.Namespace) -> TrajConfig:
    """--config, then --set, then --judge-temperature (unless judge.temperature was set)."""
    try:
        raw: dict[str, Any] = {}
        if args.config:
            TrajConfig.from_yaml(args.config)  # checks the file, naming unknown sections and keys
            raw = yaml.safe_load(args.config.read_text(encoding="utf-8")) or {}
        raw = apply_sets(raw, args.set)
        if "temperature" not in (raw.get("judge") or {}):  # steps without a judge: its default, 0
            raw.setdefault("judge", {})["temperature"] = getattr(args, "judge_temperature", 0.0)
        return TrajConfig.from_dict(raw)
    except SettingsError as e:  # a settings file, a --set or a value of the wrong type; not any ValueError
        raise UsageError(f"settings: {e}") from None


def _step_names(step: str) -> list[str]:
    """The step files a command writes."""
    if step == "run":
        return list(STEP_ORDER)
    return [f"traj.{step}"] if f"traj.{step}" in STEP_ORDER else []


def _settings_of(args: argparse.Namespace, cfg: TrajConfig, name: str) -> dict[str, Any]:
    sections, role = STEP_SETTINGS[name]
    settings: dict[str, Any] = {s: cfg.to_dict()[s] for s in sections}
    if role is not None:
        settings["model"] = answered_by(_llm_config(args, role) or _llm_config(args, "llm"))
    if name == "traj.interact" and cfg.variants.missing_value > 0:  # the user words those trajectories
        settings["user"] = answered_by(_llm_config(args, "user") or _llm_config(args, "llm"))
        settings["variants"] = cfg.to_dict()["variants"]
    if name == "traj.ingest":
        files = expand_paths(args.inputs)
        settings.update(format=args.format, domain=args.domain)
        settings["inputs"] = {str(f.resolve()): file_digest(f) for f in files}
    return settings


def _manifest_settings(args: argparse.Namespace, cfg: TrajConfig) -> dict[str, dict[str, Any]]:
    table = {name: (lambda name=name: _settings_of(args, cfg, name)) for name in STEP_SETTINGS}
    return step_settings(_step_names(args.step), table)


def check_inputs(args: argparse.Namespace) -> None:
    creates = args.step in ("ingest", "run")
    check_run_dir(args.run_dir, PIPELINE, creates=creates, first="ingest")  # also refuses an env run's
    if creates and not args.inputs:
        raise UsageError(f"{args.step} needs at least one tool-doc file or folder")
    files = list(expand_paths(args.inputs)) if creates else []
    if creates and not files:
        raise UsageError(f"no tool-doc file in {', '.join(args.inputs)} (folders are searched for *.json, *.jsonl)")
    if creates and not any(f.exists() for f in files):  # one missing among others is a rejected record
        raise UsageError(f"{', '.join(args.inputs)}: no such file or folder; name tool-doc files or folders")


def preflight_models(args: argparse.Namespace, cfg: TrajConfig) -> None:
    llm = _llm_config(args, "llm")
    needs_llm = args.step in LLM_STEPS and not (args.step == "graph" and cfg.propose.samples == 0)
    if not needs_llm:
        return
    if llm is None:
        raise UsageError(
            f"step {args.step!r} needs an LLM: pass --base-url URL --model NAME "
            "(or --responder data_synth.traj.canned:respond for a dry run)"
        )
    preflight(llm, flags=LLMFlags())
    for role, steps in (("agent", {"interact", "run"}), ("judge", {"judge", "run"}), ("user", {"interact", "run"})):
        own = _llm_config(args, role)
        if own is not None and args.step in steps:
            preflight(own, flags=LLMFlags(_prefix(role)))


def _plot_graphs(args: argparse.Namespace) -> None:
    graphs = read_outputs(args.run_dir, "traj.graph", GraphRecord)
    write_graphml(graphs, args.run_dir / "graphs.graphml")
    by_id = {g.server_id: g for g in graphs}
    for server in args.plot:
        if server not in by_id:
            print(f"--plot {server}: no graph for that server (known: {', '.join(sorted(by_id)) or 'none'})")
            continue
        print(f"plotted {plot_graph(by_id[server], args.run_dir / 'graphs' / f'{server}.png')}")


async def _run_step(args: argparse.Namespace, runner: Runner) -> tuple[list[RunStats], dict[str, Any] | None]:
    """Run the command's step(s); (what each step did, the export summary when there was one)."""
    if args.step == "ingest":
        stats = await runner.ingest(args.inputs, fmt=args.format, domain=args.domain)
        print(stats.line())
        _print_ingest_issues(args.run_dir)
        return [stats], None
    if args.step == "run":
        stats, summary = await runner.run_all(args.inputs, fmt=args.format, domain=args.domain)
        for s in stats:
            print(s.line())
        print(runner.funnel().table())
        print(f"export: {summary}")
        return stats, summary
    if args.step == "export":
        summary = runner.export()
        print(summary)
        return [], summary
    stats = await getattr(runner, args.step)()
    print(stats.line())
    print(runner.funnel().table())
    return [stats], None


def _problems(args: argparse.Namespace, stats: list[RunStats], summary: dict[str, Any] | None) -> list[str]:
    unreadable = _unreadable_inputs(args.run_dir) if args.step in ("ingest", "run") else 0
    return failures(
        stats,
        bad_inputs=f"{unreadable} input files or lines could not be read (listed above)" if unreadable else None,
        nothing_made="no trajectory was kept: sft.parquet is empty; the funnel shows where the records fell out"
        if summary is not None and not summary.get("rows")
        else None,
    )


async def _main(args: argparse.Namespace, cfg: TrajConfig) -> int:
    factory = ContextFactory(
        run_dir=str(args.run_dir),
        llm=_llm_config(args, "llm"),
        agent=_llm_config(args, "agent"),
        judge=_llm_config(args, "judge"),
        user=_llm_config(args, "user"),
        personas=cfg.tasks.personas,
    )
    runner = Runner(
        args.run_dir,
        cfg,
        factory,
        shard=Shard.parse(args.shard),
        progress=not args.quiet,
        ray_workers=args.ray_workers if args.ray else 0,
    )
    if args.step == "funnel":
        print(runner.funnel().table())
        return EXIT_OK
    try:
        stats, summary = await _run_step(args, runner)
        if args.step in ("graph", "run"):
            _plot_graphs(args)
    finally:
        await runner.aclose()
    return exit_status(_problems(args, stats, summary))


def run(args: argparse.Namespace) -> int:
    """Check the command, prepare the output folder, run the step(s); the exit status."""
    check_inputs(args)
    cfg = load_config(args)
    try:
        Shard.parse(args.shard)
    except ValueError as e:
        raise UsageError(f"--shard: {e}") from None
    preflight_models(args, cfg)
    if args.step not in READ_ONLY:
        prepare_run_dir(args, PIPELINE, STEP_ORDER, _step_names(args.step), _manifest_settings(args, cfg))
        (args.run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False), encoding="utf-8")
    if args.ray:
        import ray  # lazy: Ray is heavy and only --ray needs it

        ray.init(address=None if args.ray == "local" else args.ray, ignore_reinit_error=True)
    return run_async(_main(args, cfg))
