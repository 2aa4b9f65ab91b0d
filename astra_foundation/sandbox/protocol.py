"""What the sandbox promises its callers (the rollout, env validation, synthesis checks).

Model-written tool code is untrusted. Callers hand the sandbox a `Program` (named modules of
Python source) and get back a `Session`: a fresh, isolated instance of that program's state
for one episode. Calls run inside the session; nothing a call does can reach the caller's
process, the host, or another session. Every failure comes back as a `CallResult` whose
`message` a policy model can read; no call raises for anything the tool code did.
"""

from __future__ import annotations

import functools
import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import Enum
from typing import Any


class ErrorKind(str, Enum):
    """Why a call did not succeed. Stable strings: they are logged and counted."""

    EXCEPTION = "exception"  # the tool code raised; message carries the exception line
    TIMEOUT = "timeout"  # wall-clock or CPU-time limit hit; the session was restarted
    MEMORY = "memory"  # memory limit hit (MemoryError or the process was killed for it)
    OUTPUT_LIMIT = "output_limit"  # the tool printed or returned more than allowed
    CRASH = "crash"  # the session's process died (killed, segfault, os._exit ...)
    NOT_FOUND = "not_found"  # no such module/function in the program
    LOAD_ERROR = "load_error"  # the program's source failed to import (syntax error, raising top level)
    BAD_ARGS = "bad_args"  # arguments could not be passed (not JSON-serialisable, wrong keywords)
    FORBIDDEN = "forbidden"  # the code attempted a blocked operation (network, fork, exec, files outside)


@dataclass(frozen=True)
class Module:
    name: str  # a valid Python identifier, unique within a program
    source: str


@dataclass(frozen=True)
class Program:
    """The code of one episode's tools. Identity is the content (`digest`, which a `Session` records)."""

    modules: tuple[Module, ...]

    @functools.cached_property  # computed once per program (an open reads it twice)
    def digest(self) -> str:
        """SHA-256 of the whole program as one JSON array of [name, source] pairs. JSON quotes and
        escapes every string, so two different programs never encode alike (joining names and
        sources with a separator did: a source containing the separator read as two modules, and
        the workers' compile cache, since removed, served one program's code for the other). ASCII escapes
        make it total: a lone surrogate is encoded as `\\udXXX`, never an encoding error (such a
        program then fails validation and every call reports LOAD_ERROR). Anything that is not a
        string is encoded as a tagged object no string can produce; such programs never load."""
        pairs = [[m.name, m.source] for m in self.modules]
        text = json.dumps(pairs, ensure_ascii=True, separators=(",", ":"), default=_tagged)
        return hashlib.sha256(text.encode("ascii")).hexdigest()[:32]


def _tagged(value: Any) -> dict[str, str]:
    return {"type": type(value).__qualname__, "repr": repr(value)}


@dataclass
class CallResult:
    ok: bool
    output: str  # the return value as text (JSON for dicts/lists, str() otherwise); "" on error
    stdout: str = ""  # what the call printed (truncated to the limit)
    error_kind: ErrorKind | None = None
    message: str = ""  # on error: a short, model-readable explanation
    elapsed_s: float = 0.0

    @property
    def text(self) -> str:
        """What a policy sees as the observation."""
        if not self.ok:
            return f"Error ({self.error_kind.value if self.error_kind else 'error'}): {self.message}"
        if self.stdout and self.output:
            return self.stdout.rstrip("\n") + "\n" + self.output
        return self.output or self.stdout


@dataclass(frozen=True)
class Session:
    """A handle; the state it names lives in the sandbox."""

    id: str
    program_digest: str
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)


class Sandbox(ABC):
    """Async sandbox API. One instance serves many concurrent episodes."""

    @abstractmethod
    async def open_session(self, program: Program) -> Session:
        """Fresh state for one episode; a program that fails to load still opens (calls then
        return LOAD_ERROR), so an episode never dies on bad environment code."""

    @abstractmethod
    async def call(self, session: Session, module: str, function: str, kwargs: dict[str, Any]) -> CallResult:
        """Run `module.function(**kwargs)` in the session; never raises for tool-code failures."""

    @abstractmethod
    async def close_session(self, session: Session) -> None:
        """Release the session's state; idempotent."""

    @abstractmethod
    async def aclose(self) -> None:
        """Stop every worker."""
