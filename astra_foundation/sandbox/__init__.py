"""The sandbox: runs untrusted, model-written tool code in isolated, warm session processes.

    from astra_foundation.sandbox import Module, Program, SandboxPool, SandboxConfig

    async with SandboxPool(SandboxConfig(workers=2)) as pool:
        s = await pool.open_session(Program((Module("add", "def add(a, b): return a + b"),)))
        r = await pool.call(s, "add", "add", {"a": 1, "b": 2})   # CallResult(ok=True, output="3")
        await pool.close_session(s)

`run_calls` / `run_programs` are synchronous batch helpers (env validation, synthesis replay);
`describe_isolation()` says which layers are in force on this machine.
"""

from .batch import BatchJob, run_calls, run_programs
from .config import SandboxConfig
from .launch import SandboxUnavailable, describe_isolation
from .pool import SandboxError, SandboxPool
from .protocol import CallResult, ErrorKind, Module, Program, Sandbox, Session

__all__ = [
    "BatchJob",
    "CallResult",
    "ErrorKind",
    "Module",
    "Program",
    "Sandbox",
    "SandboxConfig",
    "SandboxError",
    "SandboxPool",
    "SandboxUnavailable",
    "Session",
    "describe_isolation",
    "run_calls",
    "run_programs",
]
