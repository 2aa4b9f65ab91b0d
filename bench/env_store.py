"""Environment lookup by id: EnvStore (sharded JSONL + binary index) vs SQLite vs scanning JSONL.

    python bench/env_store.py --n 100000

Builds N realistic environments (procedural ones, plus question variants so sizes stay real
and ids distinct), writes them to each backend, then measures open time, cold lookups (read +
parse, no cache) and warm lookups (EnvStore's LRU). Prints absolute numbers and ratios.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from benchkit import Report, machine_line

from env_registry.families.procedural import generate
from env_registry.spec import EnvSpec
from env_registry.store import EnvStore


def build(n: int, base: int) -> list[EnvSpec]:
    seeds = generate(min(n, base), seed=0)
    out = list(seeds)
    i = 0
    while len(out) < n:
        env = seeds[i % len(seeds)]
        out.append(env.model_copy(update={"question": f"{env.question} (variant {i})"}).with_id())
        i += 1
    return out


def timed(fn, reps: int) -> float:
    samples = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--base", type=int, default=3_000, help="distinct procedural environments to vary from")
    ap.add_argument("--lookups", type=int, default=2_000)
    ap.add_argument("--quick", action="store_true", help="(make bench) the defaults: 20,000 environments")
    ap.add_argument("--json", metavar="PATH", help="write the summary rows as JSON")
    args = ap.parse_args()
    print(machine_line())
    envs = build(args.n, args.base)
    lines = [e.to_json() for e in envs]
    print(f"{len(envs)} environments, mean record {sum(map(len, lines)) / len(lines) / 1024:.1f} KiB")
    rng = random.Random(0)
    probe = [rng.choice(envs).id for _ in range(args.lookups)]

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t = time.perf_counter()
        with EnvStore.open(root / "store", "a") as s:
            for i in range(0, len(envs), 1000):
                s.add_many(envs[i : i + 1000])
        write_store = time.perf_counter() - t

        t = time.perf_counter()
        db = sqlite3.connect(root / "envs.sqlite")
        db.execute("CREATE TABLE envs (id TEXT PRIMARY KEY, spec TEXT)")
        db.executemany("INSERT INTO envs VALUES (?, ?)", ((e.id, j) for e, j in zip(envs, lines, strict=True)))
        db.commit()
        db.close()
        write_sqlite = time.perf_counter() - t
        (root / "flat.jsonl").write_text("\n".join(lines) + "\n")

        open_store = timed(lambda: EnvStore.open(root / "store"), 5)
        store = EnvStore.open(root / "store", cache_size=1)  # cold: every get reads and parses
        db = sqlite3.connect(f"file:{root / 'envs.sqlite'}?mode=ro", uri=True)

        def sqlite_get(env_id: str) -> EnvSpec:
            (text,) = db.execute("SELECT spec FROM envs WHERE id = ?", (env_id,)).fetchone()
            return EnvSpec.from_json(text)

        def scan_get(env_id: str) -> EnvSpec:
            needle = f'"id":"{env_id}"'
            with open(root / "flat.jsonl") as f:
                for line in f:
                    if needle in line:
                        return EnvSpec.from_json(line)
            raise KeyError(env_id)

        def per_get(fn, ids) -> float:
            t = time.perf_counter()
            for i in ids:
                fn(i)
            return (time.perf_counter() - t) / len(ids)

        cold_store = per_get(store.get, probe)
        cold_sqlite = per_get(sqlite_get, probe)
        scan = per_get(scan_get, probe[:20])
        warm = EnvStore.open(root / "store", cache_size=len(envs))
        hot = probe[:200]
        per_get(warm.get, hot)
        warm_store = per_get(warm.get, hot * 10)
        parse_only = per_get(lambda i: EnvSpec.from_json(lines[0]), probe[:500])

    us = 1e6
    print(f"write: EnvStore {write_store:.2f} s (fsync per 1000), SQLite {write_sqlite:.2f} s")
    print(f"open EnvStore (load index of {len(envs)}): {open_store * 1e3:.1f} ms")
    print(f"cold get  EnvStore {cold_store * us:8.1f} us   SQLite {cold_sqlite * us:8.1f} us   "
          f"ratio sqlite/store {cold_sqlite / cold_store:.2f}")  # fmt: skip
    print(f"JSONL scan get {scan * us:10.1f} us   ratio scan/store {scan / cold_store:.0f}x")
    print(f"warm get (LRU) {warm_store * us:.2f} us; parsing one spec alone {parse_only * us:.1f} us")
    print(machine_line())
    report = Report("bench/env_store.py")
    report.add(what=f"environment lookup by id, cold (read + parse), {len(envs):,} environments",
               competitor="SQLite table keyed by id", ours=f"{cold_store * us:.0f} us", theirs=f"{cold_sqlite * us:.0f} us",
               ratio=f"{cold_sqlite / cold_store:.2f}x")  # fmt: skip
    report.add(what="  same", competitor="scanning a JSONL file", ours=f"{cold_store * us:.0f} us",
               theirs=f"{scan * us:,.0f} us", ratio=f"{scan / cold_store:,.0f}x")  # fmt: skip
    report.write(args.json)


if __name__ == "__main__":
    main()
