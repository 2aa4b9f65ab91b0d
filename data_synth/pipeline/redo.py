"""Redo steps of a run, or retry their rejected records, without losing what was there.

A step's `ok` and `rejected` envelopes are final: a rerun skips them. Two ways to open them again:

- `redo_steps(run_dir, steps)`: the steps' files (every shard) move to `<run_dir>/redo-<time>/`;
  the next run processes every record of those steps afresh. Pass the step and every step after
  it: later steps' records were made from the old outputs, and stable keys would let them pass
  as done.
- `retry_rejected(run_dir, steps)`: each step file is rewritten without its `rejected` envelopes
  (the original moves to `<run_dir>/redo-<time>/`), so the next run processes those records again;
  a rejection that depended on something since fixed (a tool-doc file that appeared, a prompt
  that was repaired) can then pass. Rejected records never reached later steps, so those stay.

Both must run while no process writes to the run directory (the CLIs call them before a run).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from data_synth.pipeline.records import Envelope
from data_synth.pipeline.store import step_files

__all__ = ["redo_steps", "retry_rejected"]


def _archive_dir(run_dir: Path) -> Path:
    folder = run_dir / time.strftime("redo-%Y%m%d-%H%M%S")
    n = 1
    while folder.exists():  # two redos in one second keep both archives
        folder, n = run_dir / f"{time.strftime('redo-%Y%m%d-%H%M%S')}-{n}", n + 1
    folder.mkdir(parents=True)
    return folder


def redo_steps(run_dir: str | Path, steps: list[str]) -> tuple[Path | None, int]:
    """Move the files of `steps` aside; (archive folder or None, files moved)."""
    run_dir = Path(run_dir)
    files = [f for step in steps for f in step_files(run_dir, step)]
    if not files:
        return None, 0
    archive = _archive_dir(run_dir)
    for f in files:
        os.replace(f, archive / f.name)
    return archive, len(files)


def retry_rejected(run_dir: str | Path, steps: list[str]) -> tuple[Path | None, int]:
    """Drop the rejected envelopes of `steps` (originals kept aside); (archive folder or None, dropped)."""
    run_dir = Path(run_dir)
    archive: Path | None = None
    dropped = 0
    for step in steps:
        for f in step_files(run_dir, step):
            lines = f.read_bytes().splitlines(keepends=True)
            keep = [line for line in lines if not _is_rejected(line)]
            if len(keep) == len(lines):
                continue
            archive = archive or _archive_dir(run_dir)
            tmp = f.with_suffix(".jsonl.tmp")
            tmp.write_bytes(b"".join(keep))
            os.replace(f, archive / f.name)
            os.replace(tmp, f)
            dropped += len(lines) - len(keep)
    return archive, dropped


def _is_rejected(line: bytes) -> bool:
    if not line.strip():
        return False
    try:
        return Envelope.model_validate_json(line).status == "rejected"
    except ValueError:  # a torn last line: the store's reader deals with it
        return False
