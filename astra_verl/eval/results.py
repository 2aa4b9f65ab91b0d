"""The one results file of every evaluation: a resumable, append-only JSONL file of typed records.

Every evaluation command that resumes (`eval bfcl`, `bfcl-replay`, `bfcl-single`, `envs`, `tau`)
writes `<out>/results.jsonl` through `ResultsFile`, with one rule set:

- A line is one record of the evaluation's `ResultRecord` type (a `StrictModel`: unknown keys and
  wrong types refused, `version` checked first). A line of another version is an error naming
  the line, its version and what to do; nothing is guessed.
- Each record names the run that produced it: its `run_key()` (the model or policy and the
  settings that make results comparable, `RUN_FIELDS`). A file holds one run: opening a file
  that holds another run's records for writing, or appending such a record, is refused with the
  file, what it holds, what was asked and what to do (another --out, or delete the file).
- `status` "scored" marks an id as done: a resumed run skips it; anything else ("error") runs
  again. The last record of an id wins.
- A killed run: records are written with fsync, one line each, so a crash loses at most the
  line being written. A last line that does not parse (torn mid-write) is ignored on reading and
  cut off before the next append; a complete last record without its newline is kept and the
  newline added. A line that does not parse anywhere else is an error naming the line (the
  file was edited or belongs to another tool): deliberate, kept from the first version, so
  that nothing but a crash's own damage is repaired silently.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from astra_foundation.errors import UserError
from astra_foundation.llm.types import json_text
from astra_foundation.strict import SettingsError, StrictModel


class ResultsFileError(UserError, ValueError):
    """A results file cannot serve the run: a line that is not a record of this version (not a
    torn tail), or another run's results where this run would append."""


class ResultRecord(StrictModel):
    """One line of a results file. Subclasses narrow `version` to a `Literal` with its default (the
    version they write), set `section` (how errors name the record) and `RUN_FIELDS`."""

    RUN_FIELDS: ClassVar[tuple[str, ...]] = ()
    version: int
    id: str
    status: str  # "scored": done; anything else runs again on resume

    @classmethod
    def written_version(cls) -> int:
        return cls.model_fields["version"].default

    def line(self) -> dict[str, Any]:
        """The record as its JSON line holds it. Fields are JSON values already (validated as such), so
        they are taken as they are: pydantic's serializer stops at a nesting depth a model's output
        can exceed (tests/eval/test_any_output.py). A field that is None is not written: error
        records lack the scored ones, as the lines of version 1 always did."""
        return {name: value for name in type(self).model_fields if (value := getattr(self, name)) is not None}

    def run_key(self) -> dict[str, Any]:
        """The model and settings that produced this record: records of one file share it."""
        return {name: getattr(self, name) for name in self.RUN_FIELDS}


R = TypeVar("R", bound=ResultRecord)


def describe_run(run: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v!r}" for k, v in run.items()) or "(no run fields)"


class ResultsFile(Generic[R]):
    """`path` read as records of `record_type` (see the module docstring). `run`: the run that will
    append (its `run_key()`); a file holding another run's records is refused here, before any
    work. `option`: the flag naming the file or its folder, for the messages."""

    def __init__(
        self, path: str | Path, record_type: type[R], *, run: Mapping[str, Any] | None = None, option: str = "--out"
    ):
        self.path = Path(path)
        self.record_type = record_type
        self.option = option
        self.records: dict[str, R] = {}
        self.runs: dict[tuple, tuple[int, dict[str, Any]]] = {}  # each run held: (first line, key)
        self._valid_bytes = 0
        self._lines = 0  # lines kept (the number of the last one)
        self._needs_newline = False
        self._load()
        self.run = dict(run) if run is not None else None
        if self.run is not None:
            self._check_run(self.run)

    def _load(self) -> None:
        if not self.path.exists():
            return
        lines = self.path.read_bytes().split(b"\n")
        good = 0
        for i, line in enumerate(lines):
            last = i == len(lines) - 1
            width = len(line) + (0 if last else 1)
            if not line.strip():
                good += width
                continue
            try:
                data = json.loads(line)
            except ValueError:
                if last:  # torn by a crash mid-write: ignored, cut off before the next append
                    break
                raise ResultsFileError(
                    f"{self.path}: line {i + 1} is not JSON (and not a torn last line); the file was edited or is "
                    f"not a results file: pass another {self.option} or delete it"
                ) from None
            record = self._record(data, i + 1)
            self.records[record.id] = record
            key = record.run_key()
            self.runs.setdefault(_frozen(key), (i + 1, key))
            good += width
            self._lines = i + 1
            self._needs_newline = last
        self._valid_bytes = good

    def _record(self, data: Any, line: int) -> R:
        want = self.record_type.written_version()
        what = self.record_type.section or self.record_type.__name__
        where = f"{self.path}: line {line}"
        if not isinstance(data, dict) or "version" not in data or "id" not in data:
            raise ResultsFileError(
                f"{where} lacks a version or an id ({what}): the file belongs to another tool; "
                f"pass another {self.option} or delete it"
            )
        if data["version"] != want:
            raise ResultsFileError(
                f"{where} is a version-{data['version']} {what}; this astra-verl reads and writes version {want}: "
                f"pass another {self.option} (or delete the file) and run the evaluation again"
            )
        try:
            return self.record_type(**data)
        except SettingsError as exc:
            raise ResultsFileError(
                f"{where}: {exc}; the file was not written by this version of the evaluation: "
                f"pass another {self.option} or delete it"
            ) from None

    def _check_run(self, run: Mapping[str, Any]) -> None:
        for line, held in self.runs.values():
            if held != dict(run):
                raise ResultsFileError(
                    f"{self.path} holds results of {describe_run(held)} (line {line}), not of {describe_run(run)}: "
                    f"one results file holds one run's results; pass another {self.option} or delete {self.path}"
                )

    def done(self, record_id: str) -> bool:
        record = self.records.get(record_id)
        return record is not None and record.status == "scored"

    def append(self, record: R) -> None:
        """Write `record` (fsync'd, one line); refused when it is of another run than the file's."""
        if not isinstance(record, self.record_type):
            raise TypeError(f"{self.path}: a {type(record).__name__} in a file of {self.record_type.__name__}")
        key = record.run_key()
        if self.run is not None and key != self.run:
            raise ValueError(
                f"{self.path}: a record of {describe_run(key)} appended by the run of {describe_run(self.run)} "
                "(a bug in the evaluation: its records must name its own run)"
            )
        self._check_run(key)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() and self.path.stat().st_size > self._valid_bytes:
            with open(self.path, "r+b") as f:
                f.truncate(self._valid_bytes)
        line = (json_text(record.line()) + "\n").encode("utf-8")
        if self._needs_newline:  # a complete last record that lost its newline in a crash
            line = b"\n" + line
        with open(self.path, "ab") as f:  # json_text: lone surrogates as escapes, any record fits
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._needs_newline = False
        self._valid_bytes += len(line)
        self._lines += 1
        self.records[record.id] = record
        self.runs.setdefault(_frozen(key), (self._lines, key))


def _frozen(key: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, json.dumps(v, sort_keys=True)) for k, v in key.items()))
