"""docs/synthesis.md's dry runs of both synthesis pipelines, run as written (a newcomer copies them
into a shell): the block under "Dry runs of both synthesis pipelines" in a fresh folder, `python`
being this interpreter. It ends with exit 0, a store of environments and SFT rows, and both reports."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "synthesis.md"


def guide_block(heading: str) -> str:
    """The first ```bash block after `heading` in docs/synthesis.md."""
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(heading)
    match = re.search(r"```bash\n(.*?)```", text[start:], re.S)
    assert match, f"no bash block after {heading!r} in {GUIDE}"
    return match.group(1)


def test_the_guide_dry_runs_work_as_written(tmp_path):
    script = guide_block("## Dry runs of both synthesis pipelines")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    runs = tmp_path / "runs"
    assert (runs / "dry-env" / "envs" / "store.json").exists()
    assert (runs / "dry-env" / "report" / "report.md").exists()
    assert len(pd.read_parquet(runs / "dry-traj" / "sft.parquet")) > 0
    assert (runs / "dry-traj" / "report" / "report.md").exists()
