"""Deterministic shards: record key -> shard by hash, so N independent runs split the work
exactly and their outputs merge without duplicates."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count}: need 0 <= I < N")

    @classmethod
    def parse(cls, text: str | None) -> Shard:
        """`"I/N"` (0-based I), or None for the whole input."""
        if not text:
            return cls(0, 1)
        try:
            i, n = (int(x) for x in text.split("/"))
        except ValueError:
            raise ValueError(f"--shard must look like I/N (e.g. 0/4), not {text!r}") from None
        return cls(i, n)

    def contains(self, key: str) -> bool:
        if self.count == 1:
            return True
        h = int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")
        return h % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
