"""Reading importable files: one `SourceRow` per record, each with where it came from.

- `.jsonl`: one JSON object per line (blank lines skipped); a line that is not a JSON object
  becomes a row with an `error`, so it is rejected on its own with its line number.
- `.json`: a list of objects (one row each) or a single object.
- `.parquet`: read through HF `datasets` (`Dataset.from_parquet`, local files only: nothing is
  fetched from a hub), one row per table row; columns as stored (ASTRA's releases keep nested
  structures as JSON text, which the format adapters decode).

JSON and JSONL are read with `json`, not `datasets`, because a record must be rejected on its
own, where it is: `datasets.load_dataset("json", ...)` (5.2) fails the whole file on one broken
line, naming no line ("Unexpected character found when decoding 'null' at position 0"), and types
each column across rows (a `dependency` written as the text "1" in one record and as the number 1
in another comes back as the number in both).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from astra_foundation.errors import UserError

SUFFIXES = (".json", ".jsonl", ".parquet")


class SourceError(UserError, ValueError):
    """A file that cannot be read at all (missing, unknown suffix, not JSON)."""


def check_files(files: list[str] | list[Path]) -> None:
    """SourceError naming the files that do not exist, else those this reader cannot read."""
    missing = [str(f) for f in files if not Path(f).is_file()]
    if missing:
        raise SourceError(f"no such file: {', '.join(missing)}")
    bad = [str(f) for f in files if Path(f).suffix.lower() not in SUFFIXES]
    if bad:
        raise SourceError(f"not a .json, .jsonl or .parquet file: {', '.join(bad)}")


@dataclass
class SourceRow:
    """One record of an input file. `where` locates it (`{"line": 7}`, `{"element": 3}` of a JSON list, `{"row": 12}` of a table), `text`
    is the record as read (kept with a rejected record; None for parquet rows, which are no
    text), `error` says why it is not a JSON object."""

    file: str
    where: dict[str, int]
    data: dict[str, Any] | None
    text: str | None = None
    error: str | None = None

    @property
    def label(self) -> str:
        (kind, n), *_ = self.where.items()
        return f"{self.file}:{n}" if kind == "line" else f"{self.file}[{kind} {n}]"


def _object(value: Any, what: str) -> tuple[dict[str, Any] | None, str | None]:
    if isinstance(value, dict):
        return value, None
    return None, f"{what} is a JSON {type(value).__name__}, not an object (one record per object)"


def _jsonl(path: Path) -> Iterator[SourceRow]:
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            text = line.rstrip("\n")
            if not text.strip():
                continue
            try:
                data, error = _object(json.loads(text), f"line {line_no}")
            except ValueError as exc:
                data, error = None, f"line {line_no} is not JSON: {exc}"
            yield SourceRow(str(path), {"line": line_no}, data, text, error)


def _json(path: Path) -> Iterator[SourceRow]:
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise SourceError(f"{path}: not JSON ({exc}); a file of one record per line must end in .jsonl") from None
    items = content if isinstance(content, list) else [content]
    for i, item in enumerate(items):
        data, error = _object(item, f"element {i}")
        yield SourceRow(str(path), {"element": i}, data, json.dumps(item, ensure_ascii=False), error)


def _parquet(path: Path) -> Iterator[SourceRow]:
    import datasets  # heavy optional import (about 1.5 s): only parquet inputs need it

    with tempfile.TemporaryDirectory(prefix="astra-import-") as cache:  # datasets writes a cache; keep none
        table = datasets.Dataset.from_parquet(str(path), keep_in_memory=True, cache_dir=cache)
        for i, row in enumerate(table):
            yield SourceRow(str(path), {"row": i}, dict(row))


_READERS = {".jsonl": _jsonl, ".json": _json, ".parquet": _parquet}


def read_rows(path: str | Path) -> Iterator[SourceRow]:
    """Every record of one file, in order; raises `SourceError` for a file that cannot be read."""
    path = Path(path)
    if not path.is_file():
        raise SourceError(f"no such file: {path}")
    reader = _READERS.get(path.suffix.lower())
    if reader is None:
        raise SourceError(f"{path}: unknown file type {path.suffix!r}; expected one of {', '.join(SUFFIXES)}")
    yield from reader(path)


def has_fields(*names: str) -> Callable[[dict[str, Any]], bool]:
    """A record test: every named field present and not null (a parquet file's columns are the
    union over its rows, so a row of one format shows another format's columns as null)."""
    return lambda d: all(d.get(n) is not None for n in names)


def decode_json_text(value: Any, what: str) -> Any:
    """A field that a release stores as JSON text (sometimes encoded twice), decoded; objects with
    a repeated key are refused (a JSON object keeps only the last, silently losing the others)."""
    for _ in range(3):
        if not isinstance(value, str):
            return value
        try:
            value = json.loads(value, object_pairs_hook=_unique_keys)
        except _RepeatedKey as exc:
            raise ValueError(f"{what}: key {exc.args[0]!r} appears more than once in one object") from None
        except ValueError as exc:
            raise ValueError(f"{what} is not JSON: {exc}") from None
    return value


class _RepeatedKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _RepeatedKey(k)
        out[k] = v
    return out
