"""How a worker process is started: the bubblewrap command line or the plain-process fallback,
which of the two this machine supports, and `describe_isolation()` saying what is in force.

bwrap backend (the worker and its sessions share one set of namespaces, private to the worker):
  pid, net (no interfaces but a down loopback), ipc, uts, cgroup, mount namespaces; the new root
  holds read-only binds of /usr, the system library dirs and the Python installation, a private
  /proc and /dev, and a size-limited tmpfs /tmp for work dirs; nothing else of the host exists
  there (no /home, /root, /etc/shadow, /work ...) but the directories of the installed packages
  `SandboxConfig.packages` names, bound read-only at their own paths. `--die-with-parent`, `--new-session`, and as
  root every capability dropped but setuid/setgid/chown/kill/sys_admin (to give sessions their
  own uid and tmpfs and to stop them); sessions lose all of them with the uid drop.
process backend: the worker is a plain child process (own session, minimal environment).
Both: every session then confines itself (inside/confine.py): own uid, rlimits, Landlock, seccomp.
"""

from __future__ import annotations

import functools
import glob
import importlib.util
import json
import logging
import os
import shutil
import site
import subprocess
import sys
from dataclasses import dataclass

from .config import SandboxConfig
from .inside import confine

logger = logging.getLogger("astra_foundation.sandbox")

PKG_ROOT = os.path.dirname(os.path.abspath(__file__))  # holds the `inside` package
SANDBOX_PKG_ROOT = "/opt/astra-sandbox"  # where bwrap mounts PKG_ROOT for the worker
SANDBOX_WORK_ROOT = "/tmp/sessions"
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
SYSTEM_FILES = ("/etc/localtime", "/etc/ld.so.cache")
PACKAGE_DIR_NAMES = ("site-packages", "dist-packages")
WORKER_ENV = {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin", "MALLOC_ARENA_MAX": "2"}
# Session processes each worker keeps forked and confined, waiting for a program (inside/worker.py):
# an open is then a hand-off. Two cover a worker's next opens while it forks their replacements.
SPARE_SESSIONS = 2
BOOTSTRAP = "import sys; sys.path.insert(0, {root!r}); from inside import worker; worker.main()"


class SandboxUnavailable(RuntimeError):
    """The requested backend cannot run on this machine."""


def python_executable() -> str:
    return os.path.realpath(sys.executable)


def python_dirs() -> list[str]:
    """Directories that hold the interpreter and its standard library."""
    exe_root = os.path.dirname(os.path.dirname(python_executable()))
    dirs = [os.path.realpath(sys.base_prefix), exe_root]
    return [d for d in dict.fromkeys(dirs) if not any(d.startswith(s + "/") or d == s for s in ("/usr",))]


def read_paths() -> list[str]:
    """What a session may read, coarsely (the per-session Landlock layer): system libraries, the
    Python install, a few /etc and /dev files. `fine_read_paths` is the same without the
    interpreters' package directories (the shared layer)."""
    paths = [os.path.realpath(p) for p in SYSTEM_DIRS if os.path.exists(p)]
    paths += python_dirs()
    paths += ["/dev/null", "/dev/urandom", "/dev/zero", *SYSTEM_FILES]
    return list(dict.fromkeys(p for p in paths if os.path.exists(p)))


def hidden_dirs() -> list[str]:
    """The package directories of the interpreters whose trees sessions may read: this Python's
    base install (its stdlib dir holds its site-packages) and a system Python under /usr (its
    dist-packages). "Standard library only" means these stay out of reach; the packages a pool
    exposes (`SandboxConfig.packages`) are granted one by one."""
    roots = [*python_dirs(), "/usr", "/usr/local"]
    found = [p for r in roots for kind in PACKAGE_DIR_NAMES for p in glob.glob(f"{r}/lib*/python3*/{kind}")]
    found += site.getsitepackages([sys.base_prefix, sys.base_exec_prefix])
    return sorted({os.path.realpath(p) for p in found if os.path.isdir(p)})


def _beneath(path: str, root: str) -> bool:
    return path.startswith(root.rstrip("/") + "/")


def carve(paths: list[str], hidden: list[str]) -> tuple[list[str], list[str]]:
    """`paths` with every directory of `hidden` cut out, as (granted, listed): a path above a
    hidden dir is replaced by its entries (recursively, down to the hidden dir, which is left
    out) and itself only listed. Landlock can only grant, never deny below a grant, so this is
    how a tree minus a subtree is expressed; listing a directory is one right that then covers
    its whole tree, so the hidden dir's entry names stay listable, their contents unreadable.
    An entry that is a symbolic link into or above a hidden dir is left out."""
    granted: list[str] = []
    listed: list[str] = []
    for path in paths:
        if path in hidden:
            continue
        if not any(_beneath(h, path) for h in hidden) or not os.path.isdir(path):
            granted.append(path)
            continue
        listed.append(path)
        for name in sorted(os.listdir(path)):
            child = os.path.join(path, name)
            real = os.path.realpath(child)
            if real != child and (real in hidden or any(_beneath(h, real) for h in hidden)):
                continue
            more_granted, more_listed = carve([real], hidden)
            granted += more_granted
            listed += more_listed
    return list(dict.fromkeys(granted)), list(dict.fromkeys(listed))


def fine_read_paths(packages: dict[str, str]) -> tuple[list[str], list[str]]:
    """What a session may read, exactly (the worker's shared Landlock layer), as (readable,
    listable only): `read_paths` less the interpreters' package directories, plus the exposed
    packages' own directories."""
    granted, listed = carve(read_paths(), hidden_dirs())
    return granted + list(packages.values()), listed


def package_dirs(names: tuple[str, ...]) -> dict[str, str]:
    """The directory of each installed package in `names`, found the way this process imports it."""
    dirs: dict[str, str] = {}
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError) as exc:
            raise SandboxUnavailable(f"astra.sandbox.packages: cannot locate {name!r}: {exc}") from exc
        locations = list(spec.submodule_search_locations or []) if spec else []
        if spec is None or spec.origin in (None, "namespace") or len(locations) != 1:
            found = "not installed" if spec is None else f"a {'module file' if not locations else 'namespace package'}"
            raise SandboxUnavailable(
                f"astra.sandbox.packages: {name!r} is {found}; only installed regular packages (a directory "
                "with __init__.py) can be exposed to sessions"
            )
        dirs[name] = os.path.realpath(locations[0])
    return dirs


def _bwrap_binary() -> str | None:
    return shutil.which("bwrap")


def bwrap_args(config: SandboxConfig) -> list[str]:
    """The bubblewrap options for one worker (everything before the command)."""
    root = os.geteuid() == 0
    args = [
        _bwrap_binary() or "bwrap",
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--hostname",
        "sandbox",
    ]
    if root:
        # No user namespace: it would map only uid 0, and sessions need uids of their own.
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_CHOWN"]
        # kill: to stop its sessions, which run under other uids; sys_admin: to mount each session's
        # private tmpfs. The worker runs only our code; sessions drop every capability with the uid.
        args += ["--cap-add", "CAP_KILL", "--cap-add", "CAP_SYS_ADMIN"]
    else:
        args += ["--unshare-user"]
    # The tmpfs first: a bind made before it under /tmp (a venv or a package in a clone under /tmp)
    # would be hidden by it.
    args += ["--size", str(config.tmp_mb << 20), "--tmpfs", "/tmp"]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            args += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            args += ["--ro-bind", d, d]
    for d in python_dirs():
        args += ["--ro-bind", d, d]
    for f in SYSTEM_FILES:
        args += ["--ro-bind-try", f, f]
    # An empty tmpfs over every interpreter package dir in the bound trees ("standard library
    # only"); the exposed packages' dirs are bound after it, so one of them inside it still shows.
    bound = [*SYSTEM_DIRS, *python_dirs()]
    for d in hidden_dirs():
        if any(_beneath(d, os.path.realpath(b)) for b in bound):
            args += ["--size", str(1 << 20), "--tmpfs", d]
    for d in package_dirs(config.packages).values():
        args += ["--ro-bind", d, d]
    args += ["--ro-bind", os.path.join(PKG_ROOT, "inside"), f"{SANDBOX_PKG_ROOT}/inside"]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--chdir", "/tmp"]
    return args


@dataclass(frozen=True)
class WorkerCommand:
    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    # Descriptors the worker inherits and holds for its whole life (the lock on its uid block, see
    # pool.py); whoever starts it closes its own copies once it started.
    hold_fds: tuple[int, ...] = ()


def worker_command(
    backend: str,
    config: SandboxConfig,
    ctl_fd: int,
    work_root: str,
    uids: tuple[int, int],
    hold_fds: tuple[int, ...] = (),
) -> WorkerCommand:
    """The command line that starts one worker whose control channel is the inherited `ctl_fd`
    and whose sessions take their uids (when it runs as root) from `uids` = (first, count); the
    worker inherits `hold_fds` and holds them while it lives."""
    pkg_root = SANDBOX_PKG_ROOT if backend == "bwrap" else PKG_ROOT
    packages = package_dirs(config.packages)
    cfg = {
        "fd": ctl_fd,
        "pkg_root": pkg_root,
        "work_root": work_root,
        "landlock": config.landlock,
        "tmp_mb": config.tmp_mb,
        "read_paths": read_paths() + list(packages.values()),
        "fine_read_paths": fine_read_paths(packages),  # [readable, listable only]
        "packages": packages,
        "preload": list(config.preload),
        "max_output_chars": config.max_output_chars,
        "uids": list(uids),
        "spares": SPARE_SESSIONS,
        "limits": {
            "memory_mb": config.memory_mb,
            "cpu_s": config.session_cpu_s,
            "file_size_mb": config.file_size_mb,
            "open_files": config.open_files,
            "threads": config.threads,
        },
    }
    python = [python_executable(), "-I", "-S", "-B", "-c", BOOTSTRAP.format(root=pkg_root), json.dumps(cfg)]
    if backend == "bwrap":
        return WorkerCommand(bwrap_args(config) + ["--"] + python, dict(WORKER_ENV), None, hold_fds)
    return WorkerCommand(python, dict(WORKER_ENV), work_root, hold_fds)


@functools.lru_cache(maxsize=1)
def bwrap_probe() -> tuple[bool, str]:
    """Whether bubblewrap can build our sandbox here: (works, detail). Run once per process."""
    binary = _bwrap_binary()
    if binary is None:
        return False, "bwrap not found on PATH"
    try:
        version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
        probe = subprocess.run(
            bwrap_args(SandboxConfig(workers=1)) + ["--", python_executable(), "-I", "-S", "-c", "pass"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{binary} failed to run: {exc}"
    if probe.returncode != 0:
        return False, f"{binary} cannot create the sandbox here: {probe.stderr.strip()[:300]}"
    return True, f"{version or 'bubblewrap'} at {binary}"


def resolve_backend(requested: str) -> str:
    """The backend to use for `requested` ("auto" picks bwrap when it works); logs a fallback."""
    if requested == "process":
        return "process"
    ok, detail = bwrap_probe()
    if ok:
        return "bwrap"
    if requested == "bwrap":
        raise SandboxUnavailable(f"astra.sandbox.backend=bwrap but {detail}; install bubblewrap or use backend=process")
    logger.warning(
        "sandbox: bubblewrap unavailable (%s); falling back to the weaker 'process' backend: no namespaces, "
        "so sessions can see the host's process list and world-readable files Landlock does not cover; "
        "see describe_isolation()",
        detail,
    )
    return "process"


def describe_isolation(
    config: SandboxConfig | None = None, backend: str | None = None, features: dict | None = None
) -> str:
    """Which isolation layers a pool with `config` gets on this machine, in one paragraph.

    `features` are what a started worker measured (its hello: Landlock ABI, uid drop, private
    tmpfs); without them the Landlock ABI and root-ness are read from this process and the private
    tmpfs is reported as conditional.

    Over 60 lines: one clause per isolation layer, outermost first, so the paragraph reads as
    the code does."""
    config = config or SandboxConfig()
    backend = backend or resolve_backend(config.backend)
    if features is None:
        abi = confine.landlock_abi() if config.landlock else 0
        root = os.geteuid() == 0
        tmp = "private tmpfs if the worker may mount" if root else "plain directory"
    else:
        abi, root = features.get("landlock", 0), features.get("uid_drop", False)
        tmp = "private tmpfs" if features.get("private_tmp") else "plain directory"
    ok, detail = bwrap_probe() if config.backend != "process" else (False, "chosen by config")
    parts = []
    if backend == "bwrap":
        parts.append(
            f"backend bwrap ({detail}): namespaces pid, net, ipc, uts, cgroup, mount{'' if root else ', user'}; "
            f"read-only Python and system dirs, private /proc and /dev, {config.tmp_mb} MiB tmpfs /tmp"
        )
    else:
        parts.append(
            f"backend process (no namespaces{'' if ok else ': ' + detail}): sessions share the host's pid, network "
            "and mount namespaces; the layers below contain them"
        )
    if root:
        parts.append(f"per session: own uid from {config.uid_base} without capabilities, RLIMIT_NPROC={config.threads}")
    else:
        parts.append("per session: no uid drop (not root: RLIMIT_NPROC unset; seccomp alone stops new processes)")
    parts.append(f"work dir: {tmp} ({config.tmp_mb} MiB, 4096 files)" if "tmpfs" in tmp else f"work dir: {tmp}")
    parts.append(
        f"rlimits AS={config.memory_mb} MiB, CPU={config.session_cpu_s} s, FSIZE={config.file_size_mb} MiB, "
        f"NOFILE={config.open_files}, CORE=0, SIGPENDING={confine.SIGPENDING}"
    )
    if abi:
        parts.append(
            f"Landlock ABI {abi}: read-only standard library and system libs (no site-packages), "
            "read-write own work dir, nothing else"
            + (", no TCP" if abi >= 4 else "")
            + (", signals and abstract sockets scoped" if abi >= 6 else "")
        )
    else:
        why = "disabled by config" if not config.landlock else "unavailable (kernel < 5.13 or LSM off)"
        parts.append(
            f"Landlock {why}: file access limited by "
            + ("the namespaces and " if backend == "bwrap" else "")
            + "the session uid's permissions only"
        )
    if config.packages:
        parts.append(f"importable packages (read-only): {', '.join(config.packages)}")
    if config.preload:
        parts.append(f"imported by the workers before forking sessions: {', '.join(config.preload)}")
    parts.append(
        f"seccomp ({confine.MACHINE}): no fork/exec, no sockets, signals to itself only, no ptrace, "
        "namespaces, mounts, bpf, io_uring, Linux AIO, SysV IPC, memfd, inotify/fanotify, timestamp and xattr "
        "writes; limits and scheduling of itself only"
    )
    parts.append(f"{config.call_timeout_s:g} s wall clock and {config.max_output_chars} chars of output per call")
    return "; ".join(parts)
