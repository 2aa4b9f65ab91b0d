"""Exported rows that name a store vs rows that carry their environments: what each costs.

`env_registry export-parquet --rows store` writes rows that reference their environment by id
in a store at an absolute path (the dataset works only where that path holds the store);
`--rows self-contained` (the default) writes rows that carry the environment's spec and each
distractor's schema and code, so the parquet alone resolves on any node. This measures, on the
same procedural environments exported both ways (`--mixing random`, 5-9 distractors a row):

- bytes: the parquet (train + val), and the store a store-referencing dataset also needs;
- load: what verl's `RLHFDataset` does with the file: `datasets.load_dataset("parquet")` into a
  fresh cache, then one pass over every row (its prompt-length filter decodes each row);
- row: the mean size of `extra_info.astra` (JSON), what each sample carries to the rollout;
- resolve: per episode whose environment the worker has not seen yet (one `ToolCatalog`, every
  row another environment): `RowInfo.from_extra_info`, the episode's toolset and reward target.

Figures per 100k rows are the measured ones scaled linearly from `--envs` rows.

    .venv/bin/python bench/row_portability.py [--envs 1000] [--resolve 200] [--store STORE]   # about 5 minutes on 2 idle cores
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchkit import machine_line  # noqa: E402

from astra_verl.rollout.toolset import ToolCatalog  # noqa: E402
from env_registry.arguments import _validator  # noqa: E402
from env_registry.rows import RowInfo  # noqa: E402

KINDS = ("store", "self-contained")


def cli(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "env_registry", "-q", *args], check=True, env=env, stdout=subprocess.DEVNULL)


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def load_seconds(files: list[Path], cache: Path) -> float:
    """verl's RLHFDataset path: load_dataset("parquet") into a fresh cache, then every row decoded."""
    import datasets  # heavy: imported when measured

    datasets.disable_progress_bars()
    t0 = time.perf_counter()
    for f in files:
        ds = datasets.load_dataset("parquet", data_files=str(f), cache_dir=str(cache))["train"]
        for _row in ds:
            pass
    return time.perf_counter() - t0


def resolve_ms(parquet: Path, n: int) -> float:
    """Mean ms per row to resolve an episode's environment, toolset and reward target, each row's
    environment new to the worker's catalog (a store is opened once, as a worker does)."""
    rows = pq.read_table(parquet).slice(0, n).to_pylist()
    _validator.cache_clear()  # argument validators are cached per process: each kind starts cold
    catalog = ToolCatalog()
    t0 = time.perf_counter()
    for row in rows:
        info = RowInfo.from_extra_info(row["extra_info"])
        catalog.toolset(info)
        catalog.row_target(info)
    return 1000 * (time.perf_counter() - t0) / len(rows)


def measure(kind: str, store: Path, work: Path, n_resolve: int) -> dict[str, float]:
    out = work / kind
    t0 = time.perf_counter()
    cli("--store", str(store), "export-parquet", "--out", str(out), "--mixing", "random", "--rows", kind)
    export_s = time.perf_counter() - t0
    files = sorted((out / "mix_random").glob("*.parquet"))
    rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    infos = [e["astra"] for f in files for e in pq.read_table(f, columns=["extra_info"]).column(0).to_pylist()]
    return {
        "rows": rows,
        "astra_kb": sum(len(s) for s in infos) / len(infos) / 1000,
        "parquet_bytes": sum(f.stat().st_size for f in files),
        "export_s": export_s,
        "load_s": load_seconds(files, work / f"hf-cache-{kind}"),
        "resolve_ms": resolve_ms(files[-1], n_resolve),
    }


def report(results: dict[str, dict[str, float]], store_bytes: int) -> None:
    per = 100_000 / results["store"]["rows"]
    print(f"\n{'rows':<16} {'parquet':>14} {'+ store':>10} {'export':>9} {'load (verl)':>12} {'resolve':>9} {'row':>9}")
    print(f"{'(per 100k rows)':<16} {'':>14} {'to carry':>10} {'':>9} {'':>12} {'per row':>9} {'astra':>9}")
    for kind, r in results.items():
        extra = store_bytes * per if kind == "store" else 0
        print(
            f"{kind:<16} {r['parquet_bytes'] * per / 1e9:>11.2f} GB {extra / 1e9:>7.2f} GB "
            f"{r['export_s'] * per:>7.0f} s {r['load_s'] * per:>10.0f} s {r['resolve_ms']:>6.2f} ms "
            f"{r['astra_kb']:>6.1f} KB"
        )
    a, b = results["store"], results["self-contained"]
    print(
        f"\nself-contained / store: parquet {b['parquet_bytes'] / a['parquet_bytes']:.1f}x; parquet vs parquet + store "
        f"{b['parquet_bytes'] / (a['parquet_bytes'] + store_bytes):.2f}x; load {b['load_s'] / a['load_s']:.1f}x; "
        f"resolve {b['resolve_ms'] / a['resolve_ms']:.2f}x"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--envs", type=int, default=1000, help="procedural environments (rows) to export (default 1000)")
    p.add_argument("--resolve", type=int, default=200, help="rows resolved cold per kind (default 200)")
    p.add_argument("--store", help="export this existing store instead of generating --envs environments")
    a = p.parse_args()
    print(machine_line())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        store = Path(a.store) if a.store else work / "store"
        if not a.store:
            t0 = time.perf_counter()
            cli("--store", str(store), "generate", "--n", str(a.envs), "--seed", "0")
            print(f"{a.envs} procedural environments generated in {time.perf_counter() - t0:.0f} s")
        results = {kind: measure(kind, store, work, a.resolve) for kind in KINDS}
        store_bytes = folder_bytes(store)
    print(f"measured on {results['store']['rows']} rows; store {store_bytes / 1e6:.1f} MB")
    report(results, store_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
