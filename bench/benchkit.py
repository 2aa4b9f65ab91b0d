"""What every benchmark shares: the machine line, percentiles, and the summary rows `make bench` reads.

A benchmark prints its full report for a reader and, with `--json PATH`, writes its headline
rows: one per comparison, each naming what we measured, the competing approach (what a user
would run instead), both figures, the ratio that matters and the target, if any. `bench/run_all.py`
turns those rows into the benchmark table (docs/results/benchmarks.md); nothing in it comes from anywhere else.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict:
    """The facts a number depends on: cores, CPU, Python, and the load while it was taken."""
    return {
        "cores": os.cpu_count() or 1,
        "cpu": cpu_model(),
        "python": sys.version.split()[0],
        "load": load_average(),
        "date": time.strftime("%Y-%m-%d %H:%M", time.localtime()),
    }


def machine_line() -> str:
    m = machine()
    return f"machine: {m['cores']} core(s), {m['cpu']}, Python {m['python']}; load average {m['load']} (1/5/15 min)"


def save_figure(fig, path: Path) -> Path:
    """Lay out, write (110 dpi) and close a matplotlib figure: every bench plot ends so."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds < 0.1 else f"{seconds * 1e3:.0f} ms"


@dataclass
class Row:
    """One comparison of the summary table."""

    bench: str  # the script, e.g. "bench/sandbox.py"
    what: str  # what is measured, e.g. "episode: open + 4 calls + close"
    competitor: str  # the approach a user would run instead
    ours: str  # our figure, with its unit
    theirs: str  # the competitor's figure, with its unit
    ratio: str  # the ratio that matters, e.g. "62x faster"
    target: str = ""  # the target it is held to, if any
    met: bool | None = None  # whether the target holds in this run (None: no target)


@dataclass
class Report:
    bench: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, **kw) -> Row:
        row = Row(bench=self.bench, **kw)
        self.rows.append(row)
        return row

    def write(self, path: str | None) -> None:
        """Write the rows (and the machine they were measured on) as JSON to `path`, if given."""
        if not path:
            return
        data = {"bench": self.bench, "machine": machine(), "rows": [asdict(r) for r in self.rows], "notes": self.notes}
        Path(path).write_text(json.dumps(data, indent=2))


def verdict(met: bool | None) -> str:
    return "" if met is None else ("met" if met else "NOT met")
