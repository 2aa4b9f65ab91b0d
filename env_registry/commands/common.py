"""What the `python -m env_registry` commands share: printing, opening the store, and admitting
records (structure check, sandbox replay, rejects file) for `add` and `import-astra`."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_foundation.clikit import UsageError, run_async
from env_registry.importers.sources import SourceRow
from env_registry.store import EnvStore
from env_registry.structure import ValidationIssue, check_structure
from env_registry.validate import family_rules, validate_stream

CHUNK = 1000


def say(line: str = "") -> None:
    print(line, flush=True)


def table(title: str, counts: Counter, total: int) -> None:
    say(f"{title}:")
    for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        say(f"  {str(key):<24} {n:>8}  {100 * n / max(total, 1):5.1f}%")


def open_store(args: argparse.Namespace, mode: str = "r", *, allow_scripted: bool = False) -> EnvStore:
    if Path(args.store).exists() and not Path(args.store).is_dir():
        raise UsageError(f"--store {args.store} is a file, not a store directory; pass a directory")
    try:
        return EnvStore.open(args.store, mode, allow_scripted=allow_scripted)
    except FileNotFoundError as exc:
        raise UsageError(f"{exc}") from None


def csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


class Rejects:
    """Rejected records, appended with file, place and reasons; opened on the first rejection.
    `rules` counts rejected records per rule they broke (a record with several counts in each).
    Written to `explicit`, else `default`, else next to the input file of the first rejection."""

    def __init__(self, explicit: str | None, default: Path | None = None):
        self.explicit = Path(explicit) if explicit else default
        self.path: Path | None = None
        self.count = 0
        self.rules: Counter = Counter()
        self._f = None

    def write(self, row: SourceRow, issues: list) -> None:
        self.count += 1
        self.rules.update({i.rule.value for i in issues})
        if self.count <= 10:
            first = issues[0]
            where = f" {first.field}:" if first.field else ""  # a whole-record issue has no field
            say(f"rejected {row.label}: [{first.rule.value}]{where} {first.message}")
        if self._f is None:
            self.path = self.explicit or Path(row.file).with_suffix(".rejects.jsonl")
            self._f = open(self.path, "a", encoding="utf-8")
        record = {"file": row.file, **row.where, "issues": [i.to_dict() for i in issues], "record": row.text}
        self._f.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()

    def summary(self) -> None:
        if self.count:
            say(f"rejected records with their reasons: {self.path}")
            table("rejected records by rule", self.rules, self.count)


@dataclass
class Incoming:
    """A record on its way into the store: where it came from, its spec (None when it could not
    be read into one) and the problems found so far."""

    row: SourceRow
    spec: Any
    issues: list


def admit(args: argparse.Namespace, store, incoming: Iterable[Incoming], rejects: Rejects) -> Counter:
    """Structure check, replay in the sandbox (chunks of `CHUNK`, unless --no-replay), then add;
    every rejected record goes to `rejects`. Counts of added and duplicate records."""
    totals: Counter = Counter()

    def flush(pending: list[Incoming]) -> None:
        if not pending:
            return
        failing: dict[str, list] = {}
        if not args.no_replay:
            specs = [item.spec for item in pending]
            failing = run_async(validate_stream(specs, concurrency=args.concurrency, progress=False)).issues
        good = []
        for item in pending:
            if item.spec.id in failing:
                rejects.write(item.row, failing[item.spec.id])
            else:
                good.append(item.spec)
        n = store.add_many(good)
        totals["added"] += n
        totals["duplicates"] += len(good) - n

    pending: list[Incoming] = []
    for item in incoming:
        issues = item.issues + (_structure(item.spec) if item.spec is not None else [])
        if issues:
            rejects.write(item.row, issues)
        else:
            pending.append(item)
        if len(pending) >= CHUNK:
            flush(pending)
            pending = []
    flush(pending)
    return totals


def _structure(spec: Any) -> list[ValidationIssue]:
    """Structural issues less those the environment's family waives (as `validate` reads them)."""
    waives = family_rules(spec).waives
    return [i for i in check_structure(spec) if not waives(i.rule.value, i.field)]
