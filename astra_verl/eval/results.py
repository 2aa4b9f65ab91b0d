"""A resumable, append-only JSONL results file: one record per line, the last record of an id wins.

Every evaluation command writes one (`<out>/results.jsonl`). A record is a JSON object with at
least `version` (the writer's results version) and `id`; `status` "scored" marks an id as done,
anything else (e.g. "error") is run again by the next run. Records are written with fsync, one
line each, so a crash loses at most the line being written; a line torn by a crash is cut off
when the file is next appended to. A line that is not a record of this version, anywhere but at
the end, is an error naming the line: the file belongs to another tool or version.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from astra_foundation.errors import UserError
from astra_foundation.llm.types import json_text


class ResultsFileError(UserError, ValueError):
    """A results file line is not a results record (not a torn tail)."""


class ResultsFile:
    def __init__(self, path: str | Path, version: int):
        self.path = Path(path)
        self.version = version
        self.records: dict[str, dict[str, Any]] = {}
        self._valid_bytes = 0
        self._load()

    def _load(self) -> None:
        if not self.path.exists():
            return
        lines = self.path.read_bytes().split(b"\n")
        good = 0
        for i, line in enumerate(lines):
            width = len(line) + (1 if i < len(lines) - 1 else 0)
            if not line.strip():
                good += width
                continue
            try:
                record = json.loads(line)
            except ValueError:
                if i == len(lines) - 1:  # a torn last line: cut off on the next append
                    break
                raise ResultsFileError(f"{self.path}: line {i + 1} is not JSON (not a torn last line)") from None
            if not isinstance(record, dict) or record.get("version") != self.version or "id" not in record:
                raise ResultsFileError(f"{self.path}: line {i + 1} is not a version-{self.version} results record")
            self.records[record["id"]] = record
            good += width
        self._valid_bytes = good

    def done(self, record_id: str) -> bool:
        return self.records.get(record_id, {}).get("status") == "scored"

    def append(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size > self._valid_bytes:
            with open(self.path, "r+b") as f:
                f.truncate(self._valid_bytes)
        line = (json_text(record) + "\n").encode("utf-8")  # lone surrogates as escapes: any record fits
        with open(self.path, "ab") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._valid_bytes += len(line)
        self.records[record["id"]] = record
