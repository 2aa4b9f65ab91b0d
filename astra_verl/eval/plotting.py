"""The evaluation reports' plots: pyplot on the file-only backend, and one way to save a figure.

pyplot is imported at the first plot (about a second of imports a `--help` does not need), on the
Agg backend: training machines have no display.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path) -> Path:
    """Tight layout, PNG at `path` (its folder made), the figure closed; the path."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path
