"""`make bench`'s table: rows from each benchmark's --json, failures as rows, the block in
docs/results/benchmarks.md."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # the scripts import their sibling benchkit; only for this import
try:
    import run_all
finally:
    sys.path.remove(str(BENCH))

ROW = {"bench": "bench/x.py", "what": "a | b", "competitor": "c", "ours": "1 ms", "theirs": "2 ms", "ratio": "2x"}
MACHINE = {"date": "2026-01-01 00:00", "cores": 2, "cpu": "cpu", "python": "3.11", "load": "0.1/0.2/0.3"}


def test_the_table_says_which_targets_hold_and_escapes_cells():
    rows = [dict(ROW, target=">= 2x", met=True), dict(ROW, target=">= 3x", met=False), dict(ROW, target="", met=None)]
    md = run_all.table(rows, MACHINE, dict(MACHINE, load="1.0/1.0/1.0"))
    lines = md.splitlines()
    assert "load average 0.1/0.2/0.3 before, 1.0/1.0/1.0 after" in lines[0]
    body = lines[4:]
    assert len(body) == 3 and all(line.count(" | ") == len(run_all.COLUMNS) - 1 for line in body)
    assert "a \\| b" in body[0]
    assert body[0].endswith(">= 2x (met) |") and body[1].endswith(">= 3x (**not met**) |") and body[2].endswith("|  |")


def test_a_benchmark_that_fails_or_writes_no_rows_is_reported(tmp_path):
    good = tmp_path / "good.py"
    good.write_text(
        "import json, sys\n"
        "path = sys.argv[sys.argv.index('--json') + 1]\n"
        f"json.dump({{'rows': [{ROW!r}]}}, open(path, 'w'))\n"
    )
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nprint('boom')\nsys.exit(3)\n")
    silent = tmp_path / "silent.py"
    silent.write_text("pass\n")
    out = tmp_path / "out"
    out.mkdir()
    rows, failure = run_all.run_one(good, 60, out)
    assert failure is None and rows == [ROW]
    rows, failure = run_all.run_one(bad, 60, out)
    assert rows == [] and "exit status 3" in failure and (out / "bad.log").read_text().strip() == "boom"
    rows, failure = run_all.run_one(silent, 60, out)
    assert rows == [] and "wrote no summary rows" in failure


def test_the_marked_block_is_replaced_and_nothing_else(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text(f"# x\n\nbefore\n{run_all.BEGIN}\nold table\n{run_all.END}\nafter\n")
    run_all.replace_block(doc, "| new |\n")
    assert doc.read_text() == f"# x\n\nbefore\n{run_all.BEGIN}\n| new |\n{run_all.END}\nafter\n"
    doc.write_text("no markers\n")
    with pytest.raises(SystemExit, match="needs exactly one"):
        run_all.replace_block(doc, "| new |\n")


@pytest.mark.slow
def test_every_listed_benchmark_takes_quick_and_json():
    """A script in the list joins the table through these two options: each listed script, run
    with --help as `make bench` runs it (from the repo root), imports and offers both."""
    scripts = [BENCH / script for script, _limit in run_all.BENCHES]
    assert all(p.exists() for p in scripts), [p.name for p in scripts if not p.exists()]

    def help_of(path: Path) -> subprocess.CompletedProcess:
        cmd = [sys.executable, str(path), "--help"]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=BENCH.parent)

    with ThreadPoolExecutor(max_workers=4) as pool:
        for path, proc in zip(scripts, pool.map(help_of, scripts), strict=True):
            assert proc.returncode == 0, f"{path.name} --help failed: {proc.stderr[-2000:]}"
            assert "--quick" in proc.stdout and "--json" in proc.stdout, f"{path.name} lacks --quick or --json"


def test_the_docs_table_is_a_make_bench_table():
    """docs/results/benchmarks.md holds a table that `run_all.table` wrote: its heading line and
    its columns are the ones `table` writes, and every row has a cell per column."""
    doc = (BENCH.parent / "docs" / "results" / "benchmarks.md").read_text()
    block = doc.split(run_all.BEGIN, 1)[1].split(run_all.END, 1)[0].strip().splitlines()
    header = run_all.table([], MACHINE, MACHINE).splitlines()
    assert block[0].startswith("Measured ") and block[0].endswith(header[0].split("(1/5/15 min). ", 1)[1])
    assert block[2:4] == header[2:4]
    rows = block[4:]
    assert rows and all(row.replace("\\|", "").count(" | ") == len(run_all.COLUMNS) - 1 for row in rows)


def test_the_import_check_names_an_import_that_moved(tmp_path):
    # bench/reward.py imported `solved` from astra_verl.reward after it moved to astra_verl.calls:
    # a function-level import, so only a user's `make bench` found it.
    script = tmp_path / "moved.py"
    script.write_text(
        "import json\n"
        "from astra_verl.calls import solved\n"
        "def main():\n"
        "    from astra_verl.reward import solved\n"
        "    from astra_verl.calls.solved import no_such_name\n"
        "    import no_such_module_astra\n"
    )
    problems = run_all.unresolved_imports(script)
    assert problems == [
        "moved.py:4: from astra_verl.reward import solved: astra_verl.reward has no 'solved'",
        "moved.py:5: from astra_verl.calls.solved import no_such_name: astra_verl.calls.solved has no 'no_such_name'",
        "moved.py:6: import no_such_module_astra: ModuleNotFoundError: No module named 'no_such_module_astra'",
    ]


def test_every_import_of_every_benchmark_resolves():
    proc = subprocess.run(
        [sys.executable, str(BENCH / "run_all.py"), "--check"], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every import resolves" in proc.stdout
