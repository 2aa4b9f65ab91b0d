"""`python -m astra_verl.inspect RUN_DIR`: static HTML pages of a training run's episodes.

    python -m astra_verl.inspect runs/demo              # finds runs/demo/**/episodes/<step>.jsonl
    python -m astra_verl.inspect runs/demo/rollouts --out /tmp/view --per-step 50

RUN_DIR is the run's folder or its `trainer.rollout_data_dir`; the episode records are what the
astra recipes write there (`<rollout_data_dir>/episodes/<step>.jsonl`, one per training step).
Writes OUT/index.html (the training summary: reward, F1, solved rate, turns, calls, invalid and
distractor call rates per step, with plots) and OUT/step_<N>.html (one section per episode), by
default in RUN_DIR/inspect. Exit status: 0 written; 2 nothing to show or a record that cannot be
read (the message says which file and line).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from astra_foundation.clikit import UsageError, run_cli

# The records and pages modules import matplotlib and the reward (sympy): seconds. They load
# when a command runs, so `--help` answers at once (tests/test_cli_help.py).

__all__ = ["build_parser", "find_episodes_dir", "main"]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m astra_verl.inspect", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("run_dir", type=Path, help="the run's folder, or its trainer.rollout_data_dir")
    p.add_argument("--out", type=Path, default=None, help="output folder of the pages (default RUN_DIR/inspect)")
    p.add_argument("--per-step", type=int, default=200, help="episodes shown per step page (default 200)")
    return p


def _step_files(folder: Path) -> dict[int, Path]:
    return {int(f.stem): f for f in folder.glob("*.jsonl") if f.stem.isdigit()}


def find_episodes_dir(run_dir: Path) -> Path:
    """The one `episodes/` folder with step files under `run_dir` (itself included)."""
    from astra_verl.inspect.records import EPISODES_DIR

    if not run_dir.is_dir():
        raise UsageError(f"{run_dir} is not a directory")
    found = sorted(d for d in [run_dir / EPISODES_DIR, *run_dir.rglob(EPISODES_DIR)] if d.is_dir() and _step_files(d))
    found = sorted(set(found))
    if not found:
        raise UsageError(
            f"no episode records under {run_dir} (looked for {EPISODES_DIR}/<step>.jsonl); train with an astra "
            "recipe and trainer.rollout_data_dir=DIR: its sampler writes them beside verl's dump"
        )
    if len(found) > 1:
        raise UsageError(
            f"several runs under {run_dir}: {', '.join(str(d.parent) for d in found)}; pass the one to show"
        )
    return found[0]


def _command(args: argparse.Namespace) -> int:
    from astra_verl.inspect.records import RecordError

    try:
        return _show(args)
    except RecordError as exc:
        raise UsageError(str(exc)) from exc


def _show(args: argparse.Namespace) -> int:
    from astra_verl.inspect.html import write_site
    from astra_verl.inspect.records import EpisodeRecord, dump_uids, read_records

    if args.per_step < 1:
        raise UsageError("--per-step must be >= 1")
    episodes = find_episodes_dir(args.run_dir)
    steps: dict[int, list[EpisodeRecord]] = {}
    transcripts: dict[int, dict[str, str]] = {}
    for step, path in sorted(_step_files(episodes).items()):
        steps[step] = list(read_records(path))
        dump = episodes.parent / f"{step}.jsonl"  # verl's own dump of the same step
        if dump.is_file():
            transcripts[step] = {uid: str(row.get("output", "")) for uid, row in dump_uids(dump).items()}
    out = args.out or args.run_dir / "inspect"
    index = write_site(steps, transcripts, out, source=str(episodes), per_step=args.per_step)
    n = sum(len(r) for r in steps.values())
    print(f"{n} episodes of {len(steps)} steps from {episodes}")
    print(f"training summary: {index}")
    print(
        f"episodes: {', '.join(str(out / f'step_{s}.html') for s in sorted(steps)[:3])}{' ...' if len(steps) > 3 else ''}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: _command(args), resumes=False)


if __name__ == "__main__":
    sys.exit(main())
