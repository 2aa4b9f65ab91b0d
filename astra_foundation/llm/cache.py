"""Persistent response cache: a rerun repeats no LLM call.

The key is the SHA-256 of the canonical JSON of everything that decides a response: model,
messages, tools, sampling parameters and the sample index (so n samples of one prompt are n
entries). Only successful responses are stored, as the raw `chat.completion` body.

sqlite in WAL mode: any number of processes (shards, Ray workers on one node) can share one
file; a process killed mid-write leaves the last committed entry intact (WAL replays or drops
the torn transaction, it never corrupts the database). Writes are committed one by one, so
what a killed run had received is there for the rerun.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any

from astra_foundation.llm.types import json_text

CACHE_VERSION = 1


def cache_key(request: dict[str, Any], sample: int) -> str:
    body = json_text({"v": CACHE_VERSION, "request": request, "sample": sample}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=60000")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, step TEXT, body TEXT NOT NULL, "
            "created REAL DEFAULT (julianday('now')))"
        )

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT body FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, body: dict[str, Any], *, step: str = "") -> None:
        text = json_text(body, separators=(",", ":"))
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO responses (key, step, body) VALUES (?, ?, ?)", (key, step, text))

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
