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
from astra_verl.sandbox import SandboxConfig, SandboxPool

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
