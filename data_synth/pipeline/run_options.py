"""The run options both synthesis command lines share, and what a command does with a run directory
before and after its steps (one copy for `data_synth env` and `data_synth traj`).

add_run_dir_argument(parser)    --out RUN_DIR, the run directory
add_settings_arguments(parser, sections)
                                 --config FILE, --set SECTION.KEY=VALUE
add_run_arguments(parser)        --shard, --ray [ADDRESS], --ray-workers, -q/--quiet,
                                 --force, --redo, --retry-rejected
check_run_dir(run_dir, pipeline, creates=, first=)
                                 refuse a directory the command cannot use, before anything is written
step_settings(steps, table)      what decides each written step's records (for the manifest)
answered_by(llm)                 the model (or dry-run responder) named in those settings
prepare_run_dir(args, pipeline, order, steps, settings)
                                 apply --redo / --retry-rejected, then record the steps'
                                 settings in the manifest (refused when they differ, unless --force)
failures(stats, ...)             why the command did not fully succeed; `exit_status` prints them
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from astra_foundation.clikit import EXIT_FAILED, EXIT_OK, UsageError, add_quiet
from data_synth.pipeline.manifest import forget_steps, read_manifest, record_settings
from data_synth.pipeline.redo import redo_steps, retry_rejected

if TYPE_CHECKING:  # annotations only: the runner and the LLM client load aiohttp and tqdm
    from astra_foundation.llm import LLMConfig
    from data_synth.pipeline.runner import RunStats

__all__ = [
    "add_run_arguments",
    "add_run_dir_argument",
    "add_settings_arguments",
    "answered_by",
    "check_run_dir",
    "exit_status",
    "failures",
    "prepare_run_dir",
    "step_settings",
]


def add_run_dir_argument(
    p: argparse.ArgumentParser, what: str = "every step reads and writes here (resumable)"
) -> None:
    """`--out RUN_DIR` (`args.run_dir`, a Path): the run directory, the output folder of both pipelines."""
    p.add_argument("--out", dest="run_dir", metavar="RUN_DIR", required=True, type=Path, help=f"output folder: {what}")


def add_settings_arguments(p: argparse.ArgumentParser, sections: str) -> None:
    """`--config FILE` and `--set SECTION.KEY=VALUE` (repeatable; `settings.apply_sets`), the same
    in both pipelines; `sections` names the module that lists the settings' sections."""
    p.add_argument("--config", type=Path, metavar="FILE", help=f"YAML settings (sections as in {sections})")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one setting (repeatable; VALUE is YAML), after --config",
    )


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--shard", default=None, metavar="I/N", help="process only shard I of N (by record key)")
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="run LLM steps on Ray: 'local' (a local instance) or a cluster address ('auto')",
    )
    p.add_argument("--ray-workers", type=int, default=2, help="Ray worker actors (default 2)")
    add_quiet(p)
    g = p.add_argument_group("run directory")
    g.add_argument("--force", action="store_true", help="continue a run directory made with other settings")
    g.add_argument(
        "--redo", action="store_true", help="start this step and every later one afresh (old records kept aside)"
    )
    g.add_argument("--retry-rejected", action="store_true", help="run this step's rejected records again")


def prepare_run_dir(
    args: argparse.Namespace,
    pipeline: str,
    order: Sequence[str],
    steps: Sequence[str],
    settings: Mapping[str, Mapping[str, Any]],
) -> None:
    """`steps` (in `order`, the pipeline's step files) are what this command writes."""
    run_dir: Path = args.run_dir
    if args.redo and steps:
        later = list(order[list(order).index(steps[0]) :])
        archive, moved = redo_steps(run_dir, later)
        forget_steps(run_dir, pipeline, later)
        if moved:
            print(f"redo: moved {moved} step files ({', '.join(later)}) to {archive}", flush=True)
    if args.retry_rejected and steps:
        archive, dropped = retry_rejected(run_dir, list(steps))
        where = f" (originals in {archive})" if archive else ""
        print(f"retry: {dropped} rejected records will run again{where}", flush=True)
    record_settings(run_dir, pipeline, settings, force=args.force)


def check_run_dir(run_dir: Path, pipeline: str, *, creates: bool, first: str) -> None:
    """Refuse a run directory the command cannot use, before anything is written: one that does
    not exist (unless the command `creates` it: `first` or `run`), a file, or another pipeline's
    run directory (its manifest names the pipeline)."""
    if not run_dir.is_dir() and (run_dir.exists() or not creates):
        what = "is not a directory" if run_dir.exists() else "does not exist"
        raise UsageError(f"--out {run_dir} {what}; run `{first}` (or `run`) into it first")
    if run_dir.is_dir():
        read_manifest(run_dir, pipeline)


def answered_by(llm: LLMConfig | None) -> str:
    """The model a step's records come from, as the manifest records it: the served model's name,
    else the dry run's responder or rules file ("" when there is none)."""
    if llm is None:
        return ""
    return llm.model or llm.responder or llm.scripted or ""


def step_settings(
    steps: Sequence[str], table: Mapping[str, Callable[[], Mapping[str, Any]]]
) -> dict[str, dict[str, Any]]:
    """What decides the records of each of `steps` (the step files this command writes): `table[step]()`.
    Only these steps' entries are called: one may read an input file to digest it."""
    unknown = [s for s in steps if s not in table]
    if unknown:
        raise KeyError(f"no settings rule for step(s) {', '.join(unknown)}; known: {', '.join(table)}")
    return {step: dict(table[step]()) for step in steps}


def failures(stats: Iterable[RunStats], *, bad_inputs: str | None = None, nothing_made: str | None = None) -> list[str]:
    """Why this invocation did not fully succeed (empty when it did): records that errored, then
    the pipeline's own words for rejected inputs and for a run that made nothing (None: not so)."""
    out = []
    errors = sum(s.error for s in stats)
    if errors:
        out.append(f"{errors} records errored (first error printed above); rerun the same command to retry them")
    return out + [line for line in (bad_inputs, nothing_made) if line]


def exit_status(problems: Sequence[str]) -> int:
    """Print each problem as an `error:` line on stderr; exit 1 with any, else 0."""
    for line in problems:
        print(f"error: {line}", file=sys.stderr, flush=True)
    return EXIT_FAILED if problems else EXIT_OK
