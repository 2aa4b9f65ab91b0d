"""`make bench`: every benchmark in its quick mode, one after the other, and one table of their rows.

Each benchmark runs as its own process (`python bench/X.py --quick --json ROWS`), so none
inherits another's warm caches or imports. Its full report goes to `<out>/X.log`; its summary
rows (benchkit.Row: what, competitor, ours, theirs, ratio, target) go into `<out>/table.md`, a
markdown table headed by the date, the machine and the load average before and after. The
benchmark table of docs/results/benchmarks.md is that file; a figure that is not in it does not
belong there.

A benchmark joins the table by accepting `--quick` (a run of a minute or two on 2 cores) and
`--json PATH` (write its rows with `benchkit.Report.write`). One that fails or times out gets a
row saying so, and `make bench` exits non-zero.

    .venv/bin/python bench/run_all.py [--out runs/bench] [--only sandbox,reward] [--into docs/results/benchmarks.md]
    .venv/bin/python bench/run_all.py --check

`--check` runs no benchmark: it resolves every import statement of every script in bench/, the
ones inside functions too (most benchmarks import the project lazily, after parsing their
arguments), and exits 1 naming each that no longer resolves: a module moved or renamed in the
project fails the test suite (tests/bench/test_run_all.py) instead of a user's `make bench`.

`--into PATH` also replaces the table between the `<!-- bench:begin -->` and `<!-- bench:end -->`
lines of PATH with this run's table (only after a run in which every benchmark finished).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchkit import machine

HERE = Path(__file__).resolve().parent
# (script, time limit in seconds); the quick modes add up to about 10 minutes on 2 idle cores.
# bench/learning.py is not here: it trains (SFT, GRPO, seeds) for tens of minutes and writes its own
# table (`runs/learning/<tier>/learning.md`), docs/results/learning.md.
BENCHES = (
    ("sandbox.py", 300),
    ("bfcl.py", 300),
    ("reward.py", 300),
    ("rollout.py", 300),
    ("synth_throughput.py", 420),
    ("chains.py", 180),
    ("env_store.py", 240),
    ("env_replay.py", 180),
    ("hf_cpu_rollout.py", 300),
    ("reward_hacking.py", 300),
)
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
COLUMNS = ("benchmark", "what is measured", "competing approach (what a user would run instead)", "ours", "theirs",
           "ratio", "target")  # fmt: skip


def run_one(script: Path, limit: int, out: Path) -> tuple[list[dict], str | None]:
    """(rows, failure) of one benchmark run."""
    rows_path, log_path = out / f"{script.stem}.json", out / f"{script.stem}.log"
    rows_path.unlink(missing_ok=True)
    cmd = [sys.executable, str(script), "--quick", "--json", str(rows_path)]
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        try:
            proc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, timeout=limit, cwd=HERE.parent)
        except subprocess.TimeoutExpired:
            return [], f"timed out after {limit} s (log: {log_path})"
    elapsed = time.perf_counter() - t0
    print(f"  {script.name:<22} {elapsed:6.0f} s  exit {proc.returncode}", flush=True)
    if proc.returncode != 0:
        return [], f"exit status {proc.returncode} (log: {log_path})"
    if not rows_path.exists():
        return [], f"wrote no summary rows (log: {log_path})"
    return json.loads(rows_path.read_text())["rows"], None


def unresolved_imports(script: Path) -> list[str]:
    """Each import statement of `script` (at any depth) that does not resolve here, as
    "file:line: what failed". `from M import N` resolves when M imports and N is an attribute of
    it or a submodule; a relative import is left to Python (the scripts use none)."""
    problems = []
    for node in ast.walk(ast.parse(script.read_text(), filename=str(script))):
        if isinstance(node, ast.Import):
            wanted = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module != "__future__":
            wanted = [(node.module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in wanted:
            if (failure := _resolve(module, name)) is not None:
                problems.append(f"{script.name}:{node.lineno}: {failure}")
    return problems


def _resolve(module: str, name: str | None) -> str | None:
    try:
        loaded = importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - whatever stops the import is the finding
        return f"import {module}: {type(exc).__name__}: {exc}"
    if name is None or name == "*" or hasattr(loaded, name):
        return None
    try:
        importlib.import_module(f"{module}.{name}")
    except ImportError:
        return f"from {module} import {name}: {module} has no {name!r}"
    return None


def check_imports(scripts: list[Path]) -> int:
    """`--check`: 0 when every import of every script resolves, else 1 with each failure named."""
    sys.path.insert(0, str(HERE))  # the scripts import their siblings (benchkit, learning, ...)
    problems = [problem for script in scripts for problem in unresolved_imports(script)]
    for problem in problems:
        print(f"bench/{problem}")
    print(
        f"{len(scripts)} scripts checked: "
        + (f"{len(problems)} imports do not resolve" if problems else "every import resolves")
    )
    return 1 if problems else 0


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(rows: list[dict], before: dict, after: dict) -> str:
    lines = [
        f"Measured {before['date']} on {before['cores']} core(s), {before['cpu']}, Python {before['python']}; "
        f"load average {before['load']} before, {after['load']} after (1/5/15 min). "
        "`make bench` (quick modes) printed every figure below; each script's log has the details.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    for r in rows:
        target = r.get("target") or ""
        if target and r.get("met") is not None:
            target += " (met)" if r["met"] else " (**not met**)"
        values = (
            f"`bench/{r['bench'].split('/')[-1]}`",
            r["what"],
            r["competitor"],
            r["ours"],
            r["theirs"],
            r["ratio"],
            target,
        )
        lines.append("| " + " | ".join(cell(v) for v in values) + " |")
    return "\n".join(lines) + "\n"


def replace_block(path: Path, md: str) -> None:
    """Put `md` between the BEGIN and END lines of `path` (docs/results/benchmarks.md's table)."""
    text = path.read_text()
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise SystemExit(f"{path}: needs exactly one {BEGIN} line followed by one {END} line")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    path.write_text(f"{head}{BEGIN}\n{md}{END}{tail}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="runs/bench", help="where the logs, rows and table.md go (default runs/bench)")
    ap.add_argument("--only", help="comma-separated script names (without .py) to run")
    ap.add_argument(
        "--into",
        metavar="PATH",
        help="also put the table into PATH between the bench markers (docs/results/benchmarks.md)",
    )
    ap.add_argument("--check", action="store_true", help="run nothing: check that every import of bench/*.py resolves")
    args = ap.parse_args()
    if args.check:
        return check_imports(sorted(HERE.glob("*.py")))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = set(args.only.split(",")) if args.only else None
    before = machine()
    print(f"make bench: quick mode of every benchmark; logs in {out}/ (load average {before['load']})", flush=True)
    rows, failed = [], []
    for script, limit in BENCHES:
        if only is not None and script[:-3] not in only:
            continue
        if not (HERE / script).exists():
            continue
        got, failure = run_one(HERE / script, limit, out)
        if failure:
            failed.append(script)
            got = [{"bench": f"bench/{script}", "what": "FAILED", "competitor": "-", "ours": "-", "theirs": "-",
                    "ratio": failure, "target": ""}]  # fmt: skip
        rows += got
    md = table(rows, before, machine())
    (out / "table.md").write_text(md)
    print("\n" + md)
    print(f"table: {out / 'table.md'}" + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    if args.into:
        if failed or only is not None:
            print(f"{args.into} left as it is: the table there comes from a complete run only")
        else:
            replace_block(Path(args.into), md)
            print(f"{args.into}: benchmark table replaced")
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
