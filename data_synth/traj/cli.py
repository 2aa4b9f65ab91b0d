"""`python -m data_synth traj <step> ...`: tool docs -> tool-call graph -> verified multi-turn SFT
trajectories (docs/method.md §1). Every step is resumable: rerun the same command after a crash.

    ingest INPUT...   tool docs (ASTRA records, OpenAI tools, MCP tools/list, BFCL func docs) -> servers
    graph             LLM chain proposals + schema compatibility -> weighted graph per server
                      (JSON in the step file, graphs.graphml; --plot SERVER draws graphs/SERVER.png)
    chains            weighted acyclic random walks, 2..5 tools, capped per start tool
    verify            majority vote + back-translation; failing chains are dropped
    tasks             chain-conditioned and server-only queries
    augment           diverse / complicate / persona variants
    score             LLM quality grades, per-dimension thresholds
    interact          agent with function calling vs simulated (or MCP) tools
    judge             seven-dimension reward filter (fail closed)
    export            sft.parquet (verl), trajectories.jsonl, funnel.json, report.md + plots
    funnel            print the funnel of the run so far
    run INPUT...      all of the above, in order
    import-astra FILE... --out sft.parquet
                      ASTRA-SFT conversations (OpenAI messages + tools, or the ASTRA-SFT-1k release) to
                      the same SFT parquet, checked as our own trajectories (see traj/astra_import.py)

Examples:
    python -m data_synth traj run tools/ --run-dir runs/t1 --llm-base-url http://h:8000/v1 --llm-model qwen3-32b
    # a dry run without a model (canned replies from data_synth.traj.canned: plumbing, not data)
    python -m data_synth traj run tools/ --run-dir /tmp/dry --llm-responder data_synth.traj.canned:respond
    python -m data_synth traj graph --run-dir runs/t1 --set propose.samples=0 --plot gorilla-file-system
    python -m data_synth traj interact --run-dir runs/t1 --set interact.failure_rate=0.1 --shard 0/4
    python -m data_synth traj judge --run-dir runs/t1 --judge-base-url http://j:8000/v1 --judge-model big
Settings: --config FILE (YAML, see data_synth/traj/config.py) and --set section.key=value (YAML value).
Run directory: manifest.json (each step's settings and input digests: a rerun with other settings
is refused unless --force), traj.<step>.jsonl, llm_cache.sqlite, config.yaml, sft.parquet,
trajectories.jsonl, funnel.json, report/report.md with report/plots/. --redo starts a step (and
every later one) afresh; --retry-rejected runs a step's rejected records again (a tool-doc file
that was missing at ingest, say); the old records move to RUN_DIR/redo-<time>/.
Every LLM endpoint is checked before the first record. Exit status: 0 done; 1 some record errored
(the first error is printed; rerun to retry), an input line was unreadable, or `run`/`export`
produced no trajectory; 2 the command could not start; 130 interrupted.
Train on the result with verl's SFT trainer and
`data.custom_cls.path=pkg://data_synth.traj.sft_dataset data.custom_cls.name=TrajSFTDataset`.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import yaml

from astra_foundation.clikit import EXIT_OK, UsageError, run_async, run_cli
from astra_foundation.llm import add_llm_arguments
from data_synth.pipeline.run_options import add_run_arguments

PIPELINE = "traj"
LLM_STEPS = {"graph", "verify", "tasks", "augment", "score", "interact", "judge", "run"}
READ_ONLY = {"funnel"}  # never create or change the run directory


def _load() -> None:
    """The pipeline's modules (graphs, stores, pyarrow: about a second of imports), bound in this
    module when a command runs, so `--help` answers at once (tests/test_cli_help.py). Idempotent."""
    global LLMConfig, LLMFlags, LLMSettingsError, preflight, RunStats, Shard, RunDirError, read_envelopes, read_outputs, ManifestError, file_digest, read_manifest, prepare_run_dir, answered_by, exit_status, check_run_dir, failures, step_settings, astra_import, TrajConfig, plot_graph, write_graphml, expand_paths, GraphRecord, Server, STEP_ORDER, ContextFactory, Runner  # noqa: PLW0603
    from astra_foundation.llm import LLMConfig, LLMFlags, LLMSettingsError, preflight
    from data_synth.pipeline import RunDirError, RunStats, Shard, read_envelopes, read_outputs
    from data_synth.pipeline.manifest import ManifestError, file_digest, read_manifest
    from data_synth.pipeline.run_options import (
        answered_by,
        check_run_dir,
        exit_status,
        failures,
        prepare_run_dir,
        step_settings,
    )
    from data_synth.traj import astra_import
    from data_synth.traj.config import TrajConfig
    from data_synth.traj.graph import plot_graph, write_graphml
    from data_synth.traj.ingest import expand_paths
    from data_synth.traj.records import GraphRecord, Server
    from data_synth.traj.run import STEP_ORDER, ContextFactory, Runner


STEPS = (
    "ingest",
    "graph",
    "chains",
    "verify",
    "tasks",
    "augment",
    "score",
    "interact",
    "judge",
    "export",
    "funnel",
    "run",
)
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
    "traj.interact": (("interact",), "agent"),
    "traj.judge": (("judge",), "judge"),
}


def _apply_overrides(raw: dict, sets: list[str]) -> dict:
    for item in sets:
        path, eq, value = item.partition("=")
        if not eq or "." not in path and path != "concurrency":
            raise UsageError(f"--set expects section.key=value, got {item!r}")
        parts = path.split(".")
        node = raw
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = yaml.safe_load(value)
    return raw


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m data_synth traj", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("step", choices=STEPS, help="the step to run (see above)")
    ap.add_argument("inputs", nargs="*", help="tool-doc files or folders (ingest and run)")
    ap.add_argument("--run-dir", required=True, type=Path, help="where every step reads and writes")
    ap.add_argument("--config", type=Path, help="YAML settings (sections as in data_synth/traj/config.py)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override one setting")
    ap.add_argument("--format", choices=("astra", "openai", "mcp", "bfcl"), help="input format (default: detect)")
    ap.add_argument("--domain", default="", help="domain for inputs that do not carry one")
    ap.add_argument("--plot", action="append", default=[], metavar="SERVER", help="graph: draw this server's graph")
    add_run_arguments(ap)
    add_llm_arguments(ap, "llm", "synthesis: proposals, verification, tasks, tool simulation")
    add_llm_arguments(ap, "agent", "the agent that solves tasks; default: the synthesis model")
    add_llm_arguments(ap, "judge", "the trajectory judge; default: the synthesis model", temperature=0.0)
    return ap


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


def _llm_config(args: argparse.Namespace, prefix: str) -> LLMConfig | None:
    cfg = LLMConfig.from_args(args, prefix)
    return cfg if (cfg.base_urls or cfg.scripted or cfg.responder) else None


def load_config(args: argparse.Namespace) -> TrajConfig:
    """--config, then --set, then --judge-temperature (unless judge.temperature was set)."""
    try:
        raw: dict[str, Any] = {}
        if args.config:
            TrajConfig.from_yaml(args.config)  # checks the file, naming unknown sections and keys
            raw = yaml.safe_load(args.config.read_text(encoding="utf-8")) or {}
        raw = _apply_overrides(raw, args.set)
        if "temperature" not in (raw.get("judge") or {}):
            raw.setdefault("judge", {})["temperature"] = args.judge_temperature
        return TrajConfig.from_dict(raw)
    except (ValueError, TypeError) as e:
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
            f"step {args.step!r} needs an LLM: pass --llm-base-url URL --llm-model NAME "
            "(or --llm-responder data_synth.traj.canned:respond for a dry run)"
        )
    preflight(llm, flags=LLMFlags("llm"))
    for role, steps in (("agent", {"interact", "run"}), ("judge", {"judge", "run"})):
        own = _llm_config(args, role)
        if own is not None and args.step in steps:
            preflight(own, flags=LLMFlags(role))


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


def _command(args: argparse.Namespace) -> int:
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


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["import-astra"]:  # no run directory: a conversion with its own options
        from data_synth.traj import astra_import

        return astra_import.main(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return run_cli(
        lambda: _loaded_command(args),
        interrupted="finished records are saved; rerun the same command to continue",
    )


if __name__ == "__main__":
    sys.exit(main())


def _loaded_command(args: argparse.Namespace) -> int:
    """The command after `_load`, both inside `run_cli` (Ctrl-C during the imports: one line, exit 130)."""
    _load()
    try:
        return _command(args)
    except (LLMSettingsError, ManifestError, RunDirError) as exc:  # PreflightError is one
        raise UsageError(str(exc)) from exc
