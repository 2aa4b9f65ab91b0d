"""Every module imports cleanly whatever comes first, and the plugin still registers everything."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from testkit import REPO

ORDERS, SEED = 3, 20261203


@pytest.mark.slow  # ~2-4 min: one forked interpreter per module
def test_each_module_imported_first_registers_every_astra_part_and_logs_no_error():
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / "import_check.py"), "--orders", str(ORDERS), "--seed", str(SEED)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=1500,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) > 100 + ORDERS, proc.stdout[-2000:]  # every module, then the random orders
    failed = {
        r["first"] if r["modules"] == 1 else f"random order starting {r['first']}": r["errors"]
        for r in results
        if not r["ok"]
    }
    assert not failed, json.dumps(failed, indent=1)[:6000]
