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
    python -m data_synth traj graph --run-dir runs/t1 --set propose.samples=0 --plot gorilla-file-system
    python -m data_synth traj interact --run-dir runs/t1 --set interact.failure_rate=0.1 --shard 0/4
    python -m data_synth traj judge --run-dir runs/t1 --judge-base-url http://j:8000/v1 --judge-model big
Settings: --config FILE (YAML, see data_synth/traj/config.py) and --set section.key=value (YAML value).
Train on the result with verl's SFT trainer and
`data.custom_cls.path=pkg://data_synth.traj.sft_dataset data.custom_cls.name=TrajSFTDataset`.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

import yaml

from data_synth.llm import LLMConfig, add_llm_arguments
from data_synth.pipeline import Shard, read_envelopes, read_outputs
from data_synth.traj import astra_import
from data_synth.traj.config import TrajConfig
from data_synth.traj.graph import plot_graph, write_graphml
from data_synth.traj.records import GraphRecord, Server
from data_synth.traj.run import ContextFactory, Runner

LLM_STEPS = {"graph", "verify", "tasks", "augment", "score", "interact", "judge", "run"}
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


def _apply_overrides(raw: dict, sets: list[str]) -> dict:
    for item in sets:
        path, eq, value = item.partition("=")
        if not eq or "." not in path and path != "concurrency":
            raise SystemExit(f"--set expects section.key=value, got {item!r}")
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
    ap.add_argument("--shard", default=None, metavar="I/N", help="process only shard I of N (by record key)")
    ap.add_argument("--ray", type=int, default=0, metavar="WORKERS", help="run LLM steps on N Ray actors")
    ap.add_argument("--plot", action="append", default=[], metavar="SERVER", help="graph: draw this server's graph")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_llm_arguments(ap, "llm", "synthesis: proposals, verification, tasks, tool simulation")
    add_llm_arguments(ap, "agent", "the agent that solves tasks; default: the synthesis model")
    add_llm_arguments(ap, "judge", "the trajectory judge; default: the synthesis model")
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


def _llm_config(args: argparse.Namespace, prefix: str) -> LLMConfig | None:
    cfg = LLMConfig.from_args(args, prefix)
    return cfg if (cfg.base_urls or cfg.scripted) else None


async def _main(args: argparse.Namespace) -> int:
    raw = TrajConfig.from_yaml(args.config).to_dict()
    cfg = TrajConfig.from_dict(_apply_overrides(raw, args.set))
    llm = _llm_config(args, "llm")
    needs_llm = args.step in LLM_STEPS and not (args.step == "graph" and cfg.propose.samples == 0)
    if needs_llm and llm is None:
        raise SystemExit(
            f"step {args.step!r} needs an LLM: pass --llm-base-url URL --llm-model NAME "
            "(or --llm-scripted FILE for a dry run)"
        )
    factory = ContextFactory(
        run_dir=str(args.run_dir),
        llm=llm,
        agent=_llm_config(args, "agent"),
        judge=_llm_config(args, "judge"),
        personas=cfg.tasks.personas,
    )
    if args.ray:
        import ray  # lazy: heavy, only the Ray runner needs it

        ray.init(ignore_reinit_error=True)
    runner = Runner(
        args.run_dir, cfg, factory, shard=Shard.parse(args.shard), progress=not args.no_progress, ray_workers=args.ray
    )
    args.run_dir.mkdir(parents=True, exist_ok=True)
    (args.run_dir / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False), encoding="utf-8")
    try:
        if args.step == "ingest":
            stats = await runner.ingest(args.inputs, fmt=args.format, domain=args.domain)
            print(stats.line())
            _print_ingest_issues(args.run_dir)
        elif args.step == "run":
            summary = await runner.run_all(args.inputs, fmt=args.format, domain=args.domain)
            print(runner.funnel().table())
            print(f"export: {summary}")
        elif args.step == "export":
            print(runner.export())
        elif args.step == "funnel":
            print(runner.funnel().table())
        else:
            stats = await getattr(runner, args.step)()
            print(stats.line())
            print(runner.funnel().table())
        if args.step in ("graph", "run"):
            graphs = read_outputs(args.run_dir, "traj.graph", GraphRecord)
            write_graphml(graphs, args.run_dir / "graphs.graphml")
            by_id = {g.server_id: g for g in graphs}
            for server in args.plot:
                if server not in by_id:
                    print(f"--plot {server}: no graph for that server (known: {', '.join(sorted(by_id)) or 'none'})")
                    continue
                print(f"plotted {plot_graph(by_id[server], args.run_dir / 'graphs' / f'{server}.png')}")
    finally:
        await runner.aclose()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["import-astra"]:  # no run directory: a conversion with its own options
        return astra_import.main(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return asyncio.run(_main(args))


if __name__ == "__main__":
    sys.exit(main())
