"""`python -m data_synth traj <step> ...`: tool docs -> tool-call graph -> verified multi-turn SFT
trajectories (docs/method.md §1). Every step is resumable: rerun the same command after a crash.

    ingest INPUT...   tool docs (ASTRA records, OpenAI tools, MCP tools/list, BFCL func docs) -> servers
    graph             LLM chain proposals + schema compatibility -> weighted graph per server
                      (JSON in the step file, graphs.graphml; --plot SERVER draws graphs/SERVER.png)
    chains            weighted acyclic random walks, 2..5 tools, capped per start tool
    verify            majority vote + back-translation; failing chains are dropped
    tasks             chain-conditioned and server-only queries
    augment           diverse / complicate / persona augmentations
    score             LLM quality grades, per-dimension thresholds
    variants          tasks of the other behaviours (unanswerable, missing_value, missing_function:
                      a tool removed or a value withheld; `--set variants.unanswerable=0.1`; none by default)
    interact          agent with function calling vs simulated (or MCP) tools; a missing-value task's
                      LLM user (--user-base-url/--user-model; default: the synthesis model)
    judge             seven-dimension reward filter (fail closed)
    export            sft.parquet (verl), trajectories.jsonl, funnel.json, report.md + plots
    funnel            print the funnel of the run so far
    run INPUT...      all of the above, in order
    import-astra FILE... --output-file sft.parquet
                      ASTRA-SFT conversations (OpenAI messages + tools, or the ASTRA-SFT-1k release) to
                      the same SFT parquet, checked as our own trajectories (see traj/astra_import.py)

Examples:
    python -m data_synth traj run tools/ --out runs/t1 --base-url http://h:8000/v1 --model qwen3-32b
    # a dry run without a model (canned replies from data_synth.traj.canned: plumbing, not data)
    python -m data_synth traj run tools/ --out /tmp/dry --responder data_synth.traj.canned:respond
    python -m data_synth traj graph --out runs/t1 --set propose.samples=0 --plot gorilla-file-system
    python -m data_synth traj interact --out runs/t1 --set interact.failure_rate=0.1 --shard 0/4
    python -m data_synth traj judge --out runs/t1 --judge-base-url http://j:8000/v1 --judge-model big
`python -m data_synth traj STEP --help` lists that step's flags.
Settings: --config FILE (YAML, see data_synth/traj/config.py) and --set section.key=value (YAML value).
Output folder (--out, the run directory): manifest.json (each step's settings and input digests: a rerun with other settings
is refused unless --force), traj.<step>.jsonl, llm_cache.sqlite, config.yaml, sft.parquet,
trajectories.jsonl, funnel.json, report/report.md with report/plots/. --redo starts a step (and
every later one) afresh; --retry-rejected runs a step's rejected records again (a tool-doc file
that was missing at ingest, say); the old records move to OUT/redo-<time>/.
Every LLM endpoint is checked before the first record. Exit status: 0 done; 1 some record errored
(the first error is printed; rerun to retry), an input line was unreadable, or `run`/`export`
produced no trajectory; 2 the command could not start; 130 interrupted.
Train on the result with verl's SFT trainer and
`data.custom_cls.path=pkg://astra_verl.training.sft_dataset data.custom_cls.name=TrajSFTDataset`.
"""

from __future__ import annotations

import argparse
import logging
import sys

from astra_foundation.clikit import run_cli
from astra_foundation.llm.config import add_llm_arguments
from data_synth.pipeline.run_options import add_run_arguments, add_run_dir_argument, add_settings_arguments

# This module only parses: the steps' modules (graphs, stores, pyarrow: about a second of imports)
# are imported by `data_synth.traj.commands` when a command runs, so `--help` answers at once.

_INPUTS, _LLM, _AGENT, _JUDGE, _USER, _PLOT = "inputs", "llm", "agent", "judge", "user", "plot"
# Each step and what it takes beside the output folder, the settings and the run options.
STEPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ingest": ("tool docs -> servers", (_INPUTS,)),
    "graph": ("LLM chain proposals + schema compatibility -> tool graphs", (_LLM, _PLOT)),
    "chains": ("weighted random walks over the graphs", ()),
    "verify": ("majority vote + back-translation of each chain", (_LLM,)),
    "tasks": ("chain-conditioned and server-only queries", (_LLM,)),
    "augment": ("diverse / complicate / persona augmentations", (_LLM,)),
    "score": ("LLM quality grades, per-dimension thresholds", (_LLM,)),
    "variants": ("tasks of the other behaviours: a tool removed, a value withheld", (_LLM,)),
    "interact": ("agent with function calling vs simulated (or MCP) tools", (_LLM, _AGENT, _USER)),
    "judge": ("seven-dimension reward filter", (_LLM, _JUDGE)),
    "export": ("sft.parquet, trajectories.jsonl, funnel.json, report", ()),
    "funnel": ("print the funnel of the run so far", ()),
    "run": ("all of the above, in order", (_INPUTS, _LLM, _AGENT, _JUDGE, _USER, _PLOT)),
}


def _common() -> argparse.ArgumentParser:
    """What every step takes: the output folder, the settings, the run options."""
    p = argparse.ArgumentParser(add_help=False)
    add_run_dir_argument(p)
    add_settings_arguments(p, "data_synth/traj/config.py")
    add_run_arguments(p)
    return p


def _add_takes(p: argparse.ArgumentParser, takes: tuple[str, ...]) -> None:
    if _INPUTS in takes:
        p.add_argument("inputs", nargs="*", help="tool-doc files or folders")
        p.add_argument("--format", choices=("astra", "openai", "mcp", "bfcl"), help="input format (default: detect)")
        p.add_argument("--domain", default="", help="domain for inputs that do not carry one")
    if _PLOT in takes:
        p.add_argument("--plot", action="append", default=[], metavar="SERVER", help="draw this server's graph")
    if _LLM in takes:
        add_llm_arguments(p, "", "synthesis: proposals, verification, tasks, tool simulation")
    if _AGENT in takes:
        add_llm_arguments(p, "agent", "the agent that solves tasks; default: the synthesis model")
    if _JUDGE in takes:
        add_llm_arguments(p, "judge", "the trajectory judge; default: the synthesis model", temperature=0.0)
    if _USER in takes:
        add_llm_arguments(p, "user", "the LLM user of missing-value tasks; default: the synthesis model")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m data_synth traj", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="step", required=True, metavar="STEP")
    common = _common()
    for name, (what, takes) in STEPS.items():
        p = sub.add_parser(name, parents=[common], help=what, description=f"traj {name}: {what}.")
        # What a step does not take reads as not given (the steps share one command).
        p.set_defaults(inputs=[], format=None, domain="", plot=[])
        _add_takes(p, takes)
    sub.add_parser("import-astra", help="ASTRA-SFT conversations -> the same SFT parquet (see its --help)")
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["import-astra"]:  # no run directory: a conversion with its own options
        from data_synth.traj import astra_import

        return astra_import.main(argv[1:])
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    return run_cli(
        lambda: _command(args),
        resumes=True,
        saved="finished records are saved",
    )


def _command(args: argparse.Namespace) -> int:
    """The step, its imports inside `run_cli` (Ctrl-C during them: one line, exit 130)."""
    from data_synth.traj import commands

    return commands.run(args)


if __name__ == "__main__":
    sys.exit(main())
