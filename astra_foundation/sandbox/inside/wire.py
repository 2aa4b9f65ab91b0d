"""Length-prefixed JSON frames: the one wire format between the pool and its processes.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON (an object).
File descriptors travel as SCM_RIGHTS ancillary data of the frame's first bytes; a frame that
carries descriptors says how many in its `nfds` field, so the reader can pair them up even if
the kernel delivers them with an earlier read.
"""

from __future__ import annotations

import json
import socket
import struct
from collections import deque

HEADER = struct.Struct("!I")
EXIT_CHANNEL_LOST = 75  # a session process's exit status when its channel to the pool broke
# The largest frame a session reads (a call's request, its program): larger ones break its
# channel. The pool refuses a call whose request would exceed it before sending anything.
SESSION_MAX_FRAME = 64 << 20
MAX_FDS_PER_READ = 8

# Bound here, at import time (before any tool code runs), so a tool that monkeypatches
# `json.dumps` in its own process cannot break how its results are framed.
_dumps = json.dumps
_loads = json.loads
_len = len


class ProtocolError(Exception):
    """The peer sent something that is not a valid frame (too long, not JSON, not an object)."""


def frame(payload: bytes) -> bytes:
    return HEADER.pack(_len(payload)) + payload


def encode(obj: dict) -> bytes:
    return frame(_dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace"))


class FrameBuffer:
    """Bytes and descriptors in, complete frames out (used with blocking and non-blocking reads)."""

    def __init__(self, max_frame: int):
        self.max_frame = max_frame
        self._buf = bytearray()
        self._fds: deque[int] = deque()

    def feed(self, data: bytes, fds=()) -> None:
        self._buf += data
        self._fds.extend(fds)

    def frames(self):
        """Yield `(obj, fds)` for every complete frame buffered so far."""
        while len(self._buf) >= HEADER.size:
            (n,) = HEADER.unpack_from(self._buf)
            if n > self.max_frame:
                raise ProtocolError(f"frame of {n} bytes exceeds the limit of {self.max_frame}")
            if len(self._buf) < HEADER.size + n:
                return
            payload = bytes(self._buf[HEADER.size : HEADER.size + n])
            del self._buf[: HEADER.size + n]
            try:
                obj = _loads(payload)
            except Exception as exc:  # noqa: BLE001 - ValueError, RecursionError (deep nesting) ...
                raise ProtocolError(f"frame is not JSON ({type(exc).__name__})") from None
            if not isinstance(obj, dict):
                raise ProtocolError("frame is not a JSON object")
            k = obj.get("nfds", 0)
            if not isinstance(k, int) or k < 0 or k > len(self._fds):
                raise ProtocolError(f"frame announces {k!r} descriptors, {len(self._fds)} received")
            yield obj, [self._fds.popleft() for _ in range(k)]

    def close_fds(self) -> None:
        """Close descriptors received but never claimed by a frame."""
        import os

        while self._fds:
            os.close(self._fds.popleft())


def send(sock: socket.socket, obj: dict, fds: list[int] | tuple[int, ...] = ()) -> None:
    """Blocking send of one frame (the descriptors go with its first bytes)."""
    data = encode({**obj, "nfds": len(fds)} if fds else obj)
    if fds:
        sent = socket.send_fds(sock, [data], list(fds))
        data = data[sent:]
    if data:
        sock.sendall(data)


class Reader:
    """Blocking reads of frames that carry no descriptors (a session's channel: the pool never
    sends any, and descriptors sent anyway are discarded by the kernel), into one reused buffer:
    no ancillary-data buffer and no 64 KiB allocation per read, as `socket.recv_fds` makes."""

    def __init__(self, sock: socket.socket, max_frame: int):
        self.sock = sock
        self.frames = FrameBuffer(max_frame)
        self._chunk = bytearray(1 << 16)
        self._view = memoryview(self._chunk)

    def next(self):
        """The next frame `(obj, fds)` (fds is always empty), or None at end of stream."""
        while True:
            for frame in self.frames.frames():
                return frame
            n = self.sock.recv_into(self._chunk)
            if n == 0:
                return None
            self.frames.feed(self._view[:n])
