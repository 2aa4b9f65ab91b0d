"""What the pool accepts from a session process: every frame decoded and checked here, on the host.

A session's channel carries frames the tool can forge: the tool runs in that process and may
write any bytes into any of its descriptors. So nothing a frame holds is trusted. Decoding is
total (every failure, deep nesting's RecursionError included, is a `ProtocolError`), every field
is checked for its type and every string for valid Unicode, and every limit the pool promises its caller is applied here, not only
inside the session (which the tool controls). A frame that breaks a rule means the channel's
framing can no longer be trusted: the pool then stops that process and resets the session.

Frames, in order, on a session's channel (from the session; the pool writes the program, as
`marshal` of its (name, source) pairs, after `confined`, and then one request per call):

    {"op": "confined"}  or  {"op": "fatal", "error"}   before any tool code exists in the process
    {"op": "ready", "errors": {module: message}}        after the program's top level ran
    {"id", "ok": true, "out", "stdout"}  or  {"id", "ok": false, "kind", "msg", "stdout"}   per call
"""

from __future__ import annotations

import json

from .inside import wire
from .protocol import CallResult, ErrorKind

ProtocolError = wire.ProtocolError

# The kinds a session reports itself; the others (timeout, crash) only the pool may decide.
SESSION_KINDS = frozenset(
    {
        ErrorKind.EXCEPTION,
        ErrorKind.MEMORY,
        ErrorKind.OUTPUT_LIMIT,
        ErrorKind.NOT_FOUND,
        ErrorKind.LOAD_ERROR,
        ErrorKind.BAD_ARGS,
        ErrorKind.FORBIDDEN,
    }
)
TRUNCATED = " ... (truncated)"


def decode(payload: bytes) -> dict:
    """A frame's JSON object, or ProtocolError for anything else."""
    try:
        obj = json.loads(payload)
    # ValueError (not JSON, not UTF-8), RecursionError (nesting deeper than the interpreter's
    # recursion limit), MemoryError: each means a forged frame, never a reason to raise out of the pool.
    except Exception as exc:  # noqa: BLE001
        raise ProtocolError(f"frame is not a JSON object ({type(exc).__name__})") from None
    if not isinstance(obj, dict):
        raise ProtocolError("frame is not a JSON object")
    return obj


def valid_text(text: str, what: str) -> str:
    """`text` when it is valid Unicode, else ProtocolError. JSON's `\\udXXX` escapes can carry lone
    surrogates, which no UTF-8 encoder accepts (a consumer writing the result would raise). An
    honest session never sends one: it replaces them before encoding (session.clean, wire.encode)."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ProtocolError(f"{what} holds a lone surrogate (not valid Unicode)") from None
    return text


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters (messages the pool words from the session's account)."""
    return text if len(text) <= limit else text[: max(limit - len(TRUNCATED), 0)] + TRUNCATED


def _text(frame: dict, key: str, limit: int, what: str, default: str | None = "") -> str:
    value = frame.get(key, default)
    if type(value) is not str:
        raise ProtocolError(f"{what} is not a string")
    if len(value) > limit:
        raise ProtocolError(f"{what} of {len(value):,} characters exceeds the limit of {limit:,}")
    return valid_text(value, what)


def confined(frame: dict) -> str | None:
    """The session's first frame: None when it confined itself, else why it could not. Written
    before the program reaches the process, so no tool code can have forged it."""
    op = frame.get("op")
    if op == "confined":
        return None
    if op == "fatal":
        error = frame.get("error")
        return clip(valid_text(error, "the confinement's error") if type(error) is str else "no reason given", 1000)
    raise ProtocolError("the session's first frame is neither 'confined' nor 'fatal'")


def load_errors(frame: dict, names: frozenset[str], max_chars: int) -> dict[str, str]:
    """The per-module load errors of a `ready` frame (ProtocolError for any other frame)."""
    if frame.get("op") != "ready":
        raise ProtocolError("expected the program's 'ready' frame")
    errors = frame.get("errors", {})
    if type(errors) is not dict:
        raise ProtocolError("load errors are not an object")
    checked = {}
    for name, message in errors.items():
        if name not in names or type(message) is not str:
            raise ProtocolError("a load error names no module of the program or is not a string")
        checked[name] = clip(valid_text(message, "a load error"), max_chars)
    return checked


def call_result(frame: dict, call_id: int, max_chars: int) -> CallResult:
    """The result of call `call_id` from its reply frame, with the pool's limits applied: a reply
    for another call, with fields of the wrong type, or with more output than `max_chars` (a
    session applies the limit itself; only a forged reply exceeds it) is a ProtocolError. The
    message is the one field whose honest length has no bound (it names the tool's functions):
    it is cut to `max_chars`."""
    reply_id, ok = frame.get("id"), frame.get("ok")
    if type(reply_id) is not int or reply_id != call_id:
        raise ProtocolError(f"a reply for another call than call {call_id}")
    if type(ok) is not bool:
        raise ProtocolError("a reply whose 'ok' is not true or false")
    stdout = _text(frame, "stdout", max_chars, "printed output")
    if ok:
        return CallResult(ok=True, output=_text(frame, "out", max_chars, "a result", None), stdout=stdout)
    try:
        kind = ErrorKind(frame.get("kind"))
    except (ValueError, TypeError):
        raise ProtocolError("a reply with an unknown error kind") from None
    if kind not in SESSION_KINDS:
        raise ProtocolError(f"a reply with an error kind only the pool decides ({kind.value})")
    message = frame.get("msg")
    message = (
        clip(valid_text(message, "an error message"), max_chars) if type(message) is str and message else kind.value
    )
    return CallResult(ok=False, output="", stdout=stdout, error_kind=kind, message=message)
