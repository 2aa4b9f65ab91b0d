"""`timeout(seconds)`: `asyncio.timeout` where the Python has it, an equivalent where it does not."""

from __future__ import annotations

import asyncio


def timeout(seconds: float):
    """`asyncio.timeout` (3.11+: no extra task per call, which is most of a call's overhead here),
    or an equivalent built on `loop.call_later` for Python 3.10."""
    if hasattr(asyncio, "timeout"):
        return asyncio.timeout(seconds)
    return Timeout310(seconds)


class Timeout310:
    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False

    async def __aenter__(self):
        task = asyncio.current_task()
        self.handle = asyncio.get_running_loop().call_later(self.seconds, self._expire, task)
        return self

    def _expire(self, task: asyncio.Task) -> None:
        self.expired = True
        task.cancel()

    async def __aexit__(self, exc_type, exc, tb):
        self.handle.cancel()
        if self.expired and exc_type is asyncio.CancelledError:
            raise asyncio.TimeoutError from None
        return False
