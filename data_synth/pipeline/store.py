"""Append-only, crash-safe JSONL files of envelopes, one set per step in a run directory.

Layout: `<run_dir>/<step>.jsonl` for an unsharded run, `<step>.shard-<i>-of-<n>.jsonl` per
shard. Reading a step merges every file of it, so shard outputs combine without a merge pass.

Crash safety: each envelope is one `write` of one line on an O_APPEND descriptor followed by
an `fsync` (shared by concurrent records: `append_async`); a record counts as done only once
that returned. A process killed mid-write leaves at
most one torn last line: readers skip it, and the next writer of that file cuts it off before
appending. A torn line anywhere else is corruption and raises `RunDirError` naming file and
line. De-duplication on read: for each key a final envelope (ok / rejected) beats an error,
and the first final one wins, so a record processed twice (two runs racing on one shard)
still reads once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from astra_foundation.errors import UserError
from data_synth.pipeline.records import ENVELOPE_VERSION, Envelope
from data_synth.pipeline.shard import Shard

log = logging.getLogger(__name__)


class RunDirError(UserError, RuntimeError):
    """A run directory's step files are torn or of another version (not the environment store's
    `env_registry.store.StoreError`)."""


def step_file(run_dir: str | Path, step: str, shard: Shard | None = None) -> Path:
    suffix = "" if shard is None or shard.count == 1 else f".shard-{shard.index}-of-{shard.count}"
    return Path(run_dir) / f"{step}{suffix}.jsonl"


def step_files(run_dir: str | Path, step: str) -> list[Path]:
    run_dir = Path(run_dir)
    pattern = re.compile(re.escape(step) + r"(\.shard-\d+-of-\d+)?\.jsonl")
    if not run_dir.is_dir():
        return []
    return sorted(p for p in run_dir.iterdir() if pattern.fullmatch(p.name))


def _read_file(path: Path) -> Iterator[Envelope]:
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    torn_tail = not data.endswith(b"\n")
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        last = n == len(lines)
        try:
            env = Envelope.model_validate_json(line)
        except ValidationError as e:
            if last and torn_tail:
                log.warning("%s: ignoring a torn last line (a write was interrupted)", path)
                return
            raise RunDirError(
                f"{path}:{n}: not a valid envelope ({e.errors()[0]['msg']}); the file is corrupt"
            ) from None
        if env.v != ENVELOPE_VERSION:
            raise RunDirError(f"{path}:{n}: envelope version {env.v}, this code reads {ENVELOPE_VERSION}")
        yield env


def read_envelopes(run_dir: str | Path, step: str) -> dict[str, Envelope]:
    """Every key's envelope across all files of the step, de-duplicated (see module doc)."""
    merged: dict[str, Envelope] = {}
    for path in step_files(run_dir, step):
        for env in _read_file(path):
            seen = merged.get(env.key)
            if seen is None or not seen.final:  # a later envelope supersedes an error, never a final one
                merged[env.key] = env
    return merged


class Appender:
    """Writes envelopes to one step file; see the module doc for the guarantees."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._cut_torn_tail()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._lines_written = 0
        self._lines_synced = 0
        self._sync: asyncio.Future | None = None

    def _cut_torn_tail(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return
            # walk back to the last complete line
            pos, block = size, 65536
            while pos > 0:
                start = max(0, pos - block)
                f.seek(start)
                chunk = f.read(pos - start)
                i = chunk.rfind(b"\n")
                if i >= 0:
                    keep = start + i + 1
                    break
                pos = start
            else:
                keep = 0
            log.warning("%s: cutting a torn last line (%d bytes) left by an interrupted write", self.path, size - keep)
            f.truncate(keep)
            os.fsync(f.fileno())

    def _write(self, env: Envelope) -> None:
        # Compact UTF-8 JSON, what json.dumps(model_dump(), ensure_ascii=False) wrote, 5x faster.
        line = env.model_dump_json() + "\n"
        data = line.encode("utf-8")
        written = os.write(self._fd, data)
        while written < len(data):  # short writes are rare on local disks; finish the line
            written += os.write(self._fd, data[written:])
        self._lines_written += 1

    def append(self, env: Envelope) -> None:
        """Write one envelope and fsync (blocking)."""
        self._write(env)
        os.fsync(self._fd)
        self._lines_synced = self._lines_written

    async def append_async(self, *envs: Envelope) -> None:
        """Write envelopes; return once an fsync covering them has finished. fsyncs run in a
        thread and are shared (group commit): every line written while one runs is covered by
        the next, so the event loop never blocks on the disk and N concurrent records cost
        about two fsyncs, not N."""
        for env in envs:
            self._write(env)
        target = self._lines_written
        while self._lines_synced < target:
            if self._sync is None:
                self._sync = asyncio.ensure_future(self._fsync())
            await asyncio.shield(self._sync)

    async def _fsync(self) -> None:
        covered = self._lines_written
        try:
            await asyncio.to_thread(os.fsync, self._fd)
            self._lines_synced = max(self._lines_synced, covered)
        finally:
            self._sync = None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
