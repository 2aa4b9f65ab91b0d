"""`clikit.run_async`: one Ctrl-C stops a command's event loop at once, whichever thread of the
process the kernel hands the signal to.

Each case runs `ctrl_c_child.py` in a fresh interpreter (signal dispositions are per process). The
SIGINT is sent to a thread other than the main one, with `pthread_kill`, which is what the kernel
may do with a process-directed Ctrl-C. Plain `asyncio.run` sleeps through it (the first case
shows that, so the second can fail)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CHILD = Path(__file__).with_name("ctrl_c_child.py")


def _run(mode: str, timeout: float) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run([sys.executable, str(CHILD), mode], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def test_plain_asyncio_run_misses_a_ctrl_c_taken_by_another_thread():
    assert _run("plain", timeout=8) is None  # still asleep: the reason run_async exists


def test_run_async_stops_at_once_and_raises_keyboard_interrupt():
    done = _run("run_async", timeout=60)
    assert done is not None, "run_async slept through the Ctrl-C"
    assert done.returncode == 130, done.stderr[-2000:]
    assert done.stdout.strip() == "interrupted"
    assert "Traceback" not in done.stderr, done.stderr[-2000:]


def test_run_async_returns_the_coroutines_value_and_leaves_sigint_as_it_found_it():
    done = _run("restores", timeout=60)
    assert done is not None
    assert done.stdout.strip() == "ok", done.stderr[-2000:]
