"""Helpers importable from any test (tests/ is on pytest's pythonpath; see pyproject.toml)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_python(code: str, *, env: dict[str, str] | None = None, cwd: str | Path | None = None, timeout: int = 300):
    """Run code in a fresh interpreter of this environment (a new process sees the plugin the
    way a Ray worker does)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=str(cwd or REPO),
        timeout=timeout,
    )
