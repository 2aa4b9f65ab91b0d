"""Tool programs and a one-call helper shared by the sandbox tests (tests/sandbox)."""

from __future__ import annotations

from astra_foundation.sandbox import Module, Program

# A session's own counter, uid and pid, and a way to allocate memory in it.
COUNTER = """
import os
_calls = [0]
def f(**_):
    _calls[0] += 1
    return {"calls": _calls[0], "uid": os.getuid(), "pid": os.getpid()}
def grow(mb):
    return len(bytearray(mb << 20))
"""


async def run(pool, source: str, function: str = "f", kwargs: dict | None = None):
    """One session of `source`, one call of `function`, closed again; the call's result."""
    s = await pool.open_session(Program((Module("m", source),)))
    try:
        return await pool.call(s, "m", function, kwargs or {})
    finally:
        await pool.close_session(s)
