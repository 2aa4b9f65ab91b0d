"""`SandboxConfig`: the `astra.sandbox` section of a recipe, with defaults that suit a trainer node."""

from __future__ import annotations

import os
import sys
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from astra_foundation.strict import StrictModel

Backend = Literal["auto", "bwrap", "process"]


def _default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


class SandboxConfig(StrictModel):
    """Limits and shape of a `SandboxPool`.

    workers: warm worker processes; each forks the session processes of the episodes placed on
        it, so this bounds parallel session starts, not parallel calls (every session is its own
        process). Default: min(4, CPU count).
    max_sessions: live sessions per pool; `open_session` waits while this many are open.
    call_timeout_s: wall-clock limit of one call; past it the session process is killed, the call
        returns TIMEOUT and the episode's tool state restarts fresh on its next call.
    load_timeout_s: wall-clock limit for starting a session (running the modules' top level).
    session_cpu_s: CPU seconds one session may use over its whole life (RLIMIT_CPU); catches
        background threads that spin between calls.
    memory_mb: address-space limit of a session process (RLIMIT_AS).
    max_output_chars: limit on what one call may print and, separately, return.
    file_size_mb: largest file a session may write (RLIMIT_FSIZE).
    tmp_mb: size of a session's private tmpfs work dir (when the worker may mount, i.e. as root);
        under bwrap also the size of the worker's /tmp.
    open_files: RLIMIT_NOFILE of a session.
    threads: RLIMIT_NPROC of a session's own uid (threads included); enforced only when the pool
        runs as root (it then gives every session its own uid).
    backend: "bwrap" (namespaces via bubblewrap), "process" (no namespaces: uid drop, rlimits,
        Landlock, seccomp), or "auto" (bwrap when it works on this machine, else process, logged).
    uid_base: sessions run as uids from uid_base upwards (root only); pick a range no real user has.
    landlock: use Landlock where the kernel has it. Turn off only to test the degraded fallback
        or on a kernel whose Landlock misbehaves (describe_isolation() then says so).
    packages: installed packages (top-level import names) that sessions may import, e.g.
        `[bfcl_eval, mpmath]` for BFCL's API classes. Default: none, the standard library only.
        Only each package's own directory is exposed, read-only (bound under bwrap, readable under
        Landlock), never the site-packages around it; its code runs inside the session, confined
        like tool code. A name that is not an installed regular package fails the pool's start.
    preload: modules each worker imports once, before it forks sessions, e.g. BFCL's API class
        modules: sessions then find them imported instead of importing them themselves (tens of
        ms each). An entry `module:function` also calls that function of the module, without
        arguments, after importing it: work such as loading a database belongs there, not in a
        module's top level, so the host can import the same module without doing it. Each must
        belong to `packages` or the standard library. Their code runs in the worker, unconfined:
        name installed, trusted packages only, never tool code. An entry that fails fails the
        pool's start.
    """

    section = "astra.sandbox"

    workers: int = Field(default_factory=_default_workers, gt=0)
    max_sessions: int = Field(256, gt=0)
    call_timeout_s: float = Field(5.0, gt=0)
    load_timeout_s: float = Field(10.0, gt=0)
    session_cpu_s: int = Field(60, gt=0)
    memory_mb: int = 512
    max_output_chars: int = Field(20_000, gt=0)
    file_size_mb: int = Field(16, gt=0)
    tmp_mb: int = Field(64, gt=0)
    open_files: int = Field(64, gt=0)
    threads: int = Field(16, gt=0)
    backend: Backend = "auto"
    uid_base: int = Field(1_000_000_000, gt=0)
    landlock: bool = True
    packages: tuple[str, ...] = ()
    preload: tuple[str, ...] = ()

    @field_validator("packages", mode="before")
    @classmethod
    def _package_names(cls, value: Any) -> tuple[str, ...]:
        if isinstance(value, str) or not isinstance(value, list | tuple) and not hasattr(value, "__iter__"):
            raise ValueError(f"must be a list of package names, got {value!r}")
        names = list(value)  # a list, a tuple or an OmegaConf ListConfig
        for name in names:
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"{name!r} is not a top-level package name (e.g. 'mpmath', no dots)")
        return tuple(dict.fromkeys(names))

    @field_validator("preload", mode="before")
    @classmethod
    def _preload_names(cls, value: Any) -> tuple[str, ...]:
        if isinstance(value, str) or not isinstance(value, list | tuple) and not hasattr(value, "__iter__"):
            raise ValueError(f"must be a list of module names, got {value!r}")
        names = list(value)  # a list, a tuple or an OmegaConf ListConfig
        for name in names:
            module, _, function = name.partition(":") if isinstance(name, str) else ("", "", "")
            if not all(part.isidentifier() for part in module.split(".")) or (function and not function.isidentifier()):
                raise ValueError(
                    f"{name!r} is not a module name or module:function (e.g. 'mpmath.libmp', 'pkg.data:load')"
                )
        return tuple(dict.fromkeys(names))

    @model_validator(mode="after")
    def _preload_in_packages(self) -> SandboxConfig:
        for name in self.preload:
            top = name.partition(":")[0].split(".")[0]
            if top not in self.packages and top not in sys.stdlib_module_names:
                raise ValueError(
                    f"preload: {name!r} belongs to neither astra.sandbox.packages {list(self.packages)} "
                    "nor the standard library; add its package to astra.sandbox.packages"
                )
        return self

    @field_validator("memory_mb")
    @classmethod
    def _memory(cls, value: int) -> int:
        if value < 64:
            raise ValueError(f"must be >= 64 (Python itself needs ~30 MiB), got {value}")
        return value

    @field_validator("uid_base")
    @classmethod
    def _uids(cls, value: int) -> int:
        if value + (1 << 24) >= 2**31:
            raise ValueError(f"leaves no room below 2**31 for the sessions' uids: {value}")
        return value

    @classmethod
    def from_dict(cls, d: Any) -> SandboxConfig:
        """Build from the `astra.sandbox` section (a dict or an OmegaConf node); unknown keys are errors."""
        return cls.from_mapping(d)
