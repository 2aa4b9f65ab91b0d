"""`SandboxConfig`: the `astra.sandbox` section of a recipe, with defaults that suit a trainer node."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

BACKENDS = ("auto", "bwrap", "process")


@dataclass(frozen=True)
class SandboxConfig:
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
        ms each). Each must belong to `packages` or the standard library. Their top-level code
        runs in the worker, unconfined: name installed, trusted packages only, never tool code. A
        module that fails to import fails the pool's start.
    """

    workers: int = dataclasses.field(default_factory=lambda: max(1, min(4, os.cpu_count() or 1)))
    max_sessions: int = 256
    call_timeout_s: float = 5.0
    load_timeout_s: float = 10.0
    session_cpu_s: int = 60
    memory_mb: int = 512
    max_output_chars: int = 20_000
    file_size_mb: int = 16
    tmp_mb: int = 64
    open_files: int = 64
    threads: int = 16
    backend: str = "auto"
    uid_base: int = 1_000_000_000
    landlock: bool = True
    packages: tuple[str, ...] = ()
    preload: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "packages":
                object.__setattr__(self, "packages", _package_names(value))
                continue
            if f.name == "preload":
                continue  # checked below, against the packages
            if f.name == "backend":
                if value not in BACKENDS:
                    raise ValueError(f"astra.sandbox.backend must be one of {BACKENDS}, got {value!r}")
                continue
            if f.type in ("bool", bool):
                if not isinstance(value, bool):
                    raise TypeError(f"astra.sandbox.{f.name} must be true or false, got {value!r}")
                continue
            kind = float if f.type in ("float", float) else int
            if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else int):
                raise TypeError(f"astra.sandbox.{f.name} must be {kind.__name__}, got {value!r}")
            if value <= 0:
                raise ValueError(f"astra.sandbox.{f.name} must be > 0, got {value!r}")
        if self.memory_mb < 64:
            raise ValueError(
                f"astra.sandbox.memory_mb must be >= 64 (Python itself needs ~30 MiB), got {self.memory_mb}"
            )
        object.__setattr__(self, "preload", _preload_names(self.preload, self.packages))
        if self.uid_base + (1 << 24) >= 2**31:
            raise ValueError(f"astra.sandbox.uid_base leaves no room below 2**31: {self.uid_base}")

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> SandboxConfig:
        """Build from the `astra.sandbox` section (a dict or an OmegaConf node); unknown keys are errors."""
        if d is None:
            return cls()
        if hasattr(d, "items") and not isinstance(d, dict):  # DictConfig
            d = {k: d[k] for k in d}
        if not isinstance(d, dict):
            raise TypeError(f"astra.sandbox must be a mapping, got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(
                f"unknown key(s) in astra.sandbox: {', '.join(unknown)}; known keys: {', '.join(sorted(known))}"
            )
        values = dict(d)
        for f in fields(cls):  # YAML writes 5 for 5.0: accept ints for float fields
            if f.name in values and f.type in ("float", float) and isinstance(values[f.name], int):
                values[f.name] = float(values[f.name])
        return cls(**values)


def _package_names(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):  # list, tuple, OmegaConf ListConfig
        raise TypeError(f"astra.sandbox.packages must be a list of package names, got {value!r}")
    for name in value:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(
                f"astra.sandbox.packages: {name!r} is not a top-level package name (e.g. 'mpmath', no dots)"
            )
    return tuple(dict.fromkeys(value))


def _preload_names(value: Any, packages: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise TypeError(f"astra.sandbox.preload must be a list of module names, got {value!r}")
    for name in value:
        if not isinstance(name, str) or not all(part.isidentifier() for part in name.split(".")):
            raise ValueError(f"astra.sandbox.preload: {name!r} is not a module name (e.g. 'mpmath.libmp')")
        top = name.split(".")[0]
        if top not in packages and top not in sys.stdlib_module_names:
            raise ValueError(
                f"astra.sandbox.preload: {name!r} belongs to neither astra.sandbox.packages {list(packages)} "
                "nor the standard library; add its package to astra.sandbox.packages"
            )
    return tuple(dict.fromkeys(value))
