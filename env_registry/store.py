"""The environment store: sharded, append-only JSONL with a binary id index.

Layout of a store directory:

    store.json            manifest: {"format": "astra-env-store", "version": 1, "shard_max_bytes": ...}
    shards/00000.jsonl    one `EnvSpec.to_json()` per line, appended, never rewritten
    index.bin             one fixed-size record per environment, in insertion order:
                          id (16 bytes, the 32-hex content hash), shard (u32), offset (u64),
                          length (u32), crc32 of the preceding 32 bytes (u32)
    .lock                 held (flock) by the single writer
    quarantine/           torn bytes cut off during crash recovery, kept for inspection

Why this shape. Environments are written once and read by id from every rollout worker:
- Lookup is O(1): opening reads only the index (36 bytes per environment, 3.6 MB at 100k) into
  a dict; `get` is then one `pread` of exactly the record's bytes from one shard, parsed and kept
  in an LRU. No shard is scanned or loaded.
- Parquet suits the exported training rows, not this: files are immutable (an append is a new
  file), and reading one record means decoding a whole row group.
- SQLite gives atomic appends and point lookups too, but its locking is unreliable on the
  network filesystems clusters share data on, WAL mode needs shared memory on one host, and
  the file is opaque. Here readers take no locks at all, and the data stays greppable,
  `cat`-able and rsync-able.

Crash safety. The single writer appends record lines to the last shard, then the index records
that point at them (with `durable=True`, the default, each batch fsyncs shard before index).
An index record is written only after its bytes are in the shard, so a reader trusting the
index never reads a partial record. What a crash can leave behind, and what happens to it:
- a torn index record (file size not a multiple of 36, or a bad crc at the end): readers
  ignore it; the next writer truncates it;
- shard lines after the last indexed one: the next writer re-indexes the complete, valid
  ones (their content hash is checked) and moves a torn last line to quarantine/.
A bad crc anywhere but at the end is real corruption: opening fails with `StoreCorrupt`.

Concurrency. One writer at a time (`mode="a"` takes an exclusive flock and fails fast if it is
held); any number of readers in any number of processes. A reader sees the index as of
`open` and picks up later appends on `refresh()`, which `get` also calls once on a miss.
Specs returned by `get` are shared through the LRU: treat them as read-only.
"""

from __future__ import annotations

import fcntl
import json
import os
import struct
import sys
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from pydantic import ValidationError

from astra_foundation.errors import UserError
from env_registry.spec import EnvSpec

FORMAT = "astra-env-store"
FORMAT_VERSION = 1
DEFAULT_SHARD_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_CACHE_SIZE = 4096

_ENTRY = struct.Struct("<16sIQI")  # id, shard, offset, length
_RECORD = struct.Struct("<16sIQII")  # the entry, then crc32 of its 32 bytes
_RECORD_SIZE = _RECORD.size
_MANIFEST = "store.json"
_INDEX = "index.bin"
_SHARDS = "shards"
_LOCK = ".lock"
_QUARANTINE = "quarantine"


class StoreError(UserError):
    """Misuse of a store (wrong mode, bad id, not a store directory)."""


class StoreLocked(StoreError):
    """Another process holds the store open for writing."""


class StoreCorrupt(StoreError):
    """The index or a shard contradicts itself somewhere other than a crash-torn tail."""


class IndexEntry(NamedTuple):  # a tuple: 100k of them are built on every open
    shard: int
    offset: int
    length: int


@dataclass
class RecoveryReport:
    """What opening for append repaired after a crash."""

    index_bytes_dropped: int = 0
    reindexed: int = 0
    quarantined_bytes: int = 0

    @property
    def repaired(self) -> bool:
        return bool(self.index_bytes_dropped or self.reindexed or self.quarantined_bytes)


def _pack(env_id: str, entry: IndexEntry) -> bytes:
    body = _ENTRY.pack(bytes.fromhex(env_id), entry.shard, entry.offset, entry.length)
    return body + struct.pack("<I", zlib.crc32(body))


def _shard_name(n: int) -> str:
    return f"{n:05d}.jsonl"


class EnvStore:
    """A directory of environments. Open with `EnvStore.open(path, mode)`."""

    def __init__(self, path: Path, mode: str, *, cache_size: int, durable: bool, shard_max_bytes: int):
        self.path = path
        self.mode = mode
        self.durable = durable
        self.shard_max_bytes = shard_max_bytes
        self.recovery = RecoveryReport()
        self._index: dict[str, IndexEntry] = {}
        self._order: list[str] = []
        self._index_bytes_read = 0  # how far into index.bin this reader has consumed
        self._fds: dict[int, int] = {}
        self._cache: OrderedDict[str, EnvSpec] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.RLock()
        self._lock_fd: int | None = None
        self._index_fd: int | None = None  # writer only, O_APPEND
        self._shard_fd: int | None = None  # writer only, O_APPEND
        self._shard_no = 0
        self._shard_size = 0
        self.records_read = 0  # records fetched from shards by `get` (cache misses)
        self.allow_scripted = False  # see `open`

    # -- opening ------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        mode: str = "r",
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
        durable: bool = True,
        shard_max_bytes: int = DEFAULT_SHARD_MAX_BYTES,
        allow_scripted: bool = False,
    ) -> EnvStore:
        """Open a store. `mode="r"`: read-only, lock-free, many processes at once. `mode="a"`:
        the single writer; creates the store if missing and repairs a crash-torn tail.
        `shard_max_bytes` applies when the store is created (later it comes from the manifest).
        `allow_scripted`: the writer accepts environments a dry run made (`provenance.scripted`:
        no model wrote them); without it adding one raises `StoreError`."""
        if mode not in ("r", "a"):
            raise StoreError(f"mode must be 'r' or 'a', not {mode!r}")
        root = Path(path)
        manifest = root / _MANIFEST
        if mode == "r" and not manifest.exists():
            raise FileNotFoundError(
                f"no environment store at {root} (missing {_MANIFEST}); create one with "
                "`python -m env_registry --store PATH generate` or `... add FILE.jsonl`"
            )
        if mode == "a" and not manifest.exists():
            cls._create(root, shard_max_bytes)
        meta = json.loads(manifest.read_text())
        if meta.get("format") != FORMAT or meta.get("version") != FORMAT_VERSION:
            raise StoreError(
                f"{manifest}: format {meta.get('format')!r} version {meta.get('version')!r} is not "
                f"{FORMAT!r} version {FORMAT_VERSION}"
            )
        store = cls(root, mode, cache_size=cache_size, durable=durable, shard_max_bytes=int(meta["shard_max_bytes"]))
        store.allow_scripted = allow_scripted
        if mode == "a":
            store._acquire_writer_lock()
            try:
                store._load_index(repair=True)
                store._recover_shards()
                store._open_for_append()
            except BaseException:
                store.close()
                raise
        else:
            store._load_index(repair=False)
        return store

    @staticmethod
    def _create(root: Path, shard_max_bytes: int) -> None:
        (root / _SHARDS).mkdir(parents=True, exist_ok=True)
        tmp = root / f"{_MANIFEST}.tmp"
        tmp.write_text(
            json.dumps(
                {
                    "format": FORMAT,
                    "version": FORMAT_VERSION,
                    "shard_max_bytes": shard_max_bytes,
                    "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
                indent=2,
            )
        )
        os.replace(tmp, root / _MANIFEST)  # atomic: a store either has a manifest or is not one

    def _acquire_writer_lock(self) -> None:
        fd = os.open(self.path / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "an unknown process"
            os.close(fd)
            raise StoreLocked(
                f"{self.path} is open for writing by {holder}; stores have one writer at a time: wait for "
                "it to finish or stop it (readers need no lock: open with mode='r')"
            ) from None
        # Who holds the lock, for the error a second writer gets: the lock itself is the flock, so a
        # stale line left by a crashed writer is harmless (the next writer overwrites it).
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({' '.join(sys.argv)[:200]})".encode(), 0)
        self._lock_fd = fd

    # -- index --------------------------------------------------------------------------
    def _load_index(self, *, repair: bool) -> None:
        """Read index records from where this reader stopped. A torn tail is ignored (readers) or
        cut off (the writer, which alone may change files)."""
        index_path = self.path / _INDEX
        if not index_path.exists():
            if repair:
                index_path.touch()
            return
        with open(index_path, "rb") as f:
            f.seek(self._index_bytes_read)
            data = f.read()
        n_full = len(data) // _RECORD_SIZE
        good = 0
        index, order = self._index, self._order
        for i, (raw_id, shard, offset, length, crc) in enumerate(_RECORD.iter_unpack(data[: n_full * _RECORD_SIZE])):
            start = i * _RECORD_SIZE
            if zlib.crc32(data[start : start + _ENTRY.size]) != crc:
                if i < n_full - 1:
                    raise StoreCorrupt(
                        f"{index_path}: record {self._index_bytes_read // _RECORD_SIZE + i} has a bad checksum "
                        "and is not the last one (not a crash-torn tail); restore the store from a copy"
                    )
                break
            env_id = raw_id.hex()
            if env_id not in index:
                order.append(env_id)
            index[env_id] = IndexEntry(shard, offset, length)
            good += 1
        self._index_bytes_read += good * _RECORD_SIZE
        torn = len(data) - good * _RECORD_SIZE
        if torn and repair:
            with open(index_path, "r+b") as f:
                f.truncate(self._index_bytes_read)
            self.recovery.index_bytes_dropped += torn

    def refresh(self) -> int:
        """Pick up environments appended since this store was opened; returns how many."""
        with self._lock:
            before = len(self._order)
            self._load_index(repair=False)
            return len(self._order) - before

    # -- crash recovery (writer only) ---------------------------------------------------
    def _recover_shards(self) -> None:
        """Index complete, valid shard lines the index does not cover (a crash between shard and
        index writes); quarantine a torn last line."""
        shard_dir = self.path / _SHARDS
        shard_dir.mkdir(exist_ok=True)
        shard_nos = sorted(int(p.stem) for p in shard_dir.glob("*.jsonl"))
        indexed_end: dict[int, int] = {}
        for e in self._index.values():
            indexed_end[e.shard] = max(indexed_end.get(e.shard, 0), e.offset + e.length)
        last_indexed = max(indexed_end, default=0)
        recovered: list[tuple[str, IndexEntry]] = []
        recovered_ids: set[str] = set()
        for no in (n for n in shard_nos if n >= last_indexed):
            path = shard_dir / _shard_name(no)
            start = indexed_end.get(no, 0)
            with open(path, "rb") as f:
                f.seek(start)
                tail = f.read()
            pos = 0
            while pos < len(tail):
                nl = tail.find(b"\n", pos)
                line = tail[pos : nl + 1] if nl >= 0 else tail[pos:]
                spec = self._parse_recovered(line) if nl >= 0 else None
                if spec is None:
                    self._quarantine(path, start + pos, tail[pos:])
                    with open(path, "r+b") as f:
                        f.truncate(start + pos)
                    break
                if spec.id not in self._index and spec.id not in recovered_ids:
                    recovered.append((spec.id, IndexEntry(no, start + pos, len(line))))
                    recovered_ids.add(spec.id)
                pos += len(line)
        if recovered:
            with open(self.path / _INDEX, "ab") as f:
                f.write(b"".join(_pack(i, e) for i, e in recovered))
                f.flush()
                os.fsync(f.fileno())
            for env_id, entry in recovered:
                self._index[env_id] = entry
                self._order.append(env_id)
            self._index_bytes_read += len(recovered) * _RECORD_SIZE
            self.recovery.reindexed += len(recovered)

    @staticmethod
    def _parse_recovered(line: bytes) -> EnvSpec | None:
        try:
            spec = EnvSpec.from_json(line)
        except (ValidationError, ValueError):
            return None
        return spec if spec.id == spec.content_hash() else None

    def _quarantine(self, shard: Path, offset: int, data: bytes) -> None:
        qdir = self.path / _QUARANTINE
        qdir.mkdir(exist_ok=True)
        (qdir / f"{shard.stem}-{offset}-{int(time.time())}.bin").write_bytes(data)
        self.recovery.quarantined_bytes += len(data)

    def _open_for_append(self) -> None:
        shard_dir = self.path / _SHARDS
        existing = sorted(int(p.stem) for p in shard_dir.glob("*.jsonl"))
        self._shard_no = existing[-1] if existing else 0
        self._open_shard(self._shard_no)
        self._index_fd = os.open(self.path / _INDEX, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _open_shard(self, no: int) -> None:
        if self._shard_fd is not None:
            os.close(self._shard_fd)
        path = self.path / _SHARDS / _shard_name(no)
        self._shard_fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._shard_no = no
        self._shard_size = os.fstat(self._shard_fd).st_size

    # -- writing ------------------------------------------------------------------------
    def add(self, spec: EnvSpec) -> bool:
        """Append one environment; False when its content hash is already stored."""
        return self.add_many([spec]) == 1

    def add_many(self, specs: Iterable[EnvSpec]) -> int:
        """Append environments in one durable batch; returns how many were new. Specs with an
        empty id get their content hash; a non-empty id that is not the hash is refused, and so
        is a dry run's environment unless the store was opened with `allow_scripted` (nothing of
        a refused batch is written)."""
        if self.mode != "a":
            raise StoreError(f"{self.path} is open read-only; open it with mode='a' to add environments")
        specs = list(specs)
        if not self.allow_scripted:
            scripted = [s for s in specs if s.provenance.scripted]
            if scripted:
                raise StoreError(
                    f"{len(scripted)} environment(s) (first {scripted[0].id or '(no id)'}) were made by a dry run: "
                    f"{scripted[0].provenance.scripted} answered, not a model; {self.path} takes them only when "
                    "asked (--allow-scripted; EnvStore.open(..., allow_scripted=True))"
                )
        with self._lock:
            pending: list[tuple[str, bytes]] = []
            seen: set[str] = set()
            for spec in specs:
                digest = spec.content_hash()
                if not spec.id:
                    spec = spec.model_copy(update={"id": digest})
                elif spec.id != digest:
                    raise StoreError(
                        f"environment {spec.id!r}: id is not its content hash {digest!r}; build specs with "
                        "EnvSpec.create(...) or call .with_id() after editing"
                    )
                if spec.id in self._index or spec.id in seen:
                    continue
                seen.add(spec.id)
                pending.append((spec.id, spec.to_json().encode("utf-8") + b"\n"))
            if not pending:
                return 0
            entries: list[tuple[str, IndexEntry]] = []
            batch: list[bytes] = []
            for env_id, line in pending:
                if self._shard_size and self._shard_size + len(line) > self.shard_max_bytes:
                    self._write_shard(b"".join(batch))
                    batch = []
                    self._open_shard(self._shard_no + 1)
                entries.append((env_id, IndexEntry(self._shard_no, self._shard_size, len(line))))
                batch.append(line)
                self._shard_size += len(line)
            self._write_shard(b"".join(batch))
            self._write_all(self._index_fd, b"".join(_pack(i, e) for i, e in entries))
            if self.durable:
                os.fsync(self._index_fd)
            for env_id, entry in entries:
                self._index[env_id] = entry
                self._order.append(env_id)
            self._index_bytes_read += len(entries) * _RECORD_SIZE
            return len(entries)

    def _write_shard(self, data: bytes) -> None:
        if not data:
            return
        self._write_all(self._shard_fd, data)
        if self.durable:
            os.fsync(self._shard_fd)  # before the index can point at these bytes

    @staticmethod
    def _write_all(fd: int | None, data: bytes) -> None:
        assert fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]

    # -- reading ------------------------------------------------------------------------
    def get(self, env_id: str) -> EnvSpec:
        """The environment with this id (shared via the LRU: do not mutate it)."""
        with self._lock:
            spec = self._cache.get(env_id)
            if spec is not None:
                self._cache.move_to_end(env_id)
                return spec
            entry = self._index.get(env_id)
            if entry is None and self.mode == "r" and self.refresh():
                entry = self._index.get(env_id)
            if entry is None:
                raise KeyError(
                    f"environment {env_id!r} is not in the store at {self.path} ({len(self._order)} environments)"
                )
            spec = self._read(env_id, entry)
            self._cache[env_id] = spec
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            return spec

    def _read(self, env_id: str, entry: IndexEntry) -> EnvSpec:
        fd = self._fds.get(entry.shard)
        if fd is None:
            fd = os.open(self.path / _SHARDS / _shard_name(entry.shard), os.O_RDONLY)
            self._fds[entry.shard] = fd
        data = os.pread(fd, entry.length, entry.offset)
        self.records_read += 1
        try:
            spec = EnvSpec.from_json(data)
        except (ValidationError, ValueError) as exc:
            raise StoreCorrupt(
                f"{self.path}: record of {env_id} (shard {entry.shard}, offset {entry.offset}) does not parse: {exc}"
            ) from exc
        if spec.id != env_id:
            raise StoreCorrupt(f"{self.path}: index entry {env_id} points at the record of {spec.id}")
        return spec

    def __contains__(self, env_id: object) -> bool:
        return env_id in self._index

    def __len__(self) -> int:
        return len(self._order)

    def ids(self) -> list[str]:
        """Every id, in insertion order."""
        return list(self._order)

    def __iter__(self) -> Iterator[EnvSpec]:
        """Every environment in insertion order, streamed shard by shard (bypasses the LRU)."""
        by_shard: dict[int, list[tuple[int, int, str]]] = {}
        for env_id in list(self._order):
            e = self._index[env_id]
            by_shard.setdefault(e.shard, []).append((e.offset, e.length, env_id))
        for shard in sorted(by_shard):
            with open(self.path / _SHARDS / _shard_name(shard), "rb", buffering=1 << 20) as f:
                for offset, length, env_id in sorted(by_shard[shard]):
                    f.seek(offset)
                    spec = EnvSpec.from_json(f.read(length))
                    if spec.id != env_id:
                        raise StoreCorrupt(f"{self.path}: index entry {env_id} points at the record of {spec.id}")
                    yield spec

    def filter(self, pred: Callable[[EnvSpec], bool]) -> Iterator[EnvSpec]:
        return (spec for spec in self if pred(spec))

    # -- lifetime -----------------------------------------------------------------------
    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        for name in ("_shard_fd", "_index_fd", "_lock_fd"):
            fd = getattr(self, name)
            if fd is not None:
                os.close(fd)  # closing the lock fd releases the flock
                setattr(self, name, None)

    def __enter__(self) -> EnvStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __reduce__(self):
        # Ray ships loop configs to workers: a store travels as its location and reopens read-only.
        if self.mode != "r":
            raise StoreError("a store open for writing cannot be pickled; pickle a read-only one")
        return (_reopen, (str(self.path), self._cache_size))

    def __repr__(self) -> str:
        return f"EnvStore({str(self.path)!r}, mode={self.mode!r}, n={len(self)})"


def _reopen(path: str, cache_size: int) -> EnvStore:
    return EnvStore.open(path, "r", cache_size=cache_size)
