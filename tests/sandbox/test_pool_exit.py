"""A pool nobody closed, in an event loop on another thread (a Ray async actor's), at interpreter
exit: its finalizer kills the workers, and the loop must neither report them as crashed nor start
replacements (that was the "sandbox worker ... died ... starting a replacement" at the end of
every clean training run)."""

from __future__ import annotations

from testkit import run_python

EXIT_WITH_A_LIVE_POOL = """
import asyncio, atexit, logging, threading, time
atexit.register(time.sleep, 1.0)  # as Ray's exit handlers do: the loop thread still runs after the finalizer
logging.basicConfig(level=logging.WARNING)
from astra_foundation.sandbox import SandboxConfig, SandboxPool

loop = asyncio.new_event_loop()
threading.Thread(target=loop.run_forever, daemon=True).start()

async def start():
    return await SandboxPool(SandboxConfig(workers=1)).start()

pool = asyncio.run_coroutine_threadsafe(start(), loop).result(60)
print("pool up", flush=True)
"""


def test_exit_with_a_pool_never_closed_is_quiet(tmp_path):
    proc = run_python(EXIT_WITH_A_LIVE_POOL, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and "pool up" in proc.stdout, proc.stderr[-3000:]
    for noise in ("died", "replacement", "never retrieved", "Traceback"):
        assert noise not in proc.stderr, proc.stderr[-3000:]


CHILDREN_KILLED_THEN_EXIT = """
import asyncio, logging, os, signal, threading, time
logging.basicConfig(level=logging.WARNING)
from astra_foundation.sandbox import SandboxConfig, SandboxPool

loop = asyncio.new_event_loop()
threading.Thread(target=loop.run_forever, daemon=True).start()

async def start():
    return await SandboxPool(SandboxConfig(workers=2)).start()

pool = asyncio.run_coroutine_threadsafe(start(), loop).result(60)
for w in pool._workers:
    os.kill(w.popen.pid, signal.SIGKILL)  # what Ray's KillChildProcs does as an actor exits
time.sleep(0.5)  # the event loop runs on while the host finishes exiting
print("exiting", flush=True)
os._exit(0)
"""


def test_workers_killed_by_an_exiting_host_are_not_reported_as_crashes(tmp_path):
    """A Ray actor's graceful exit SIGKILLs its child processes while its event loop still runs,
    then the process ends: the pool reports and replaces a dead worker only after a grace period
    (REPLACE_GRACE_S), which the exiting host never reaches."""
    proc = run_python(CHILDREN_KILLED_THEN_EXIT, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0 and "exiting" in proc.stdout, proc.stderr[-3000:]
    for noise in ("died", "replacement", "never retrieved"):
        assert noise not in proc.stderr, proc.stderr[-3000:]
