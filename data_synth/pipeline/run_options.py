"""The run options both synthesis command lines share, and what they do to a run directory.

add_run_arguments(parser)        --shard, --ray [ADDRESS], --ray-workers, -q/--quiet,
                                 --force, --redo, --retry-rejected
prepare_run_dir(args, pipeline, order, steps, settings)
                                 apply --redo / --retry-rejected, then record the steps'
                                 settings in the manifest (refused when they differ, unless --force)
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from astra_foundation.clikit import add_quiet
from data_synth.pipeline.manifest import forget_steps, record_settings
from data_synth.pipeline.redo import redo_steps, retry_rejected

__all__ = ["add_run_arguments", "prepare_run_dir"]


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
