"""Import each module of astra_verl, env_registry and data_synth first, in a fresh interpreter.

Run by `test_imports.py`; by hand: `python tests/import_check.py [--orders K --seed N] [MODULE ...]`.
`--walk` imports every module once, in one process, and exits 1 naming each that failed (run by
test_optional_parts.py with an optional part hidden).

A module imported first is what a user's `python -m ...` or a Ray worker does. When that module
reaches `import verl` half-initialised, verl's plugin loader imports our plugin, whose modules
may then find the first one half-loaded. Each module therefore gets its own
interpreter: a process forked from a parent that has imported the third-party packages verl
and our modules use, but no module of verl's or ours (forking spares ~5 s of torch and
transformers per module and changes nothing of what imports first among verl's and ours).
The child imports its module; when that imported verl, verl's registries must hold every
astra name; nothing may be logged at error level. `--orders K` then imports every module in K
random (seeded) orders, one process each, and checks the registries after each.

Prints one JSON line per process: {"first", "modules", "ok", "errors": [...]}.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import os
import random
import subprocess
import sys
from pathlib import Path

PACKAGES = ("astra_verl", "env_registry", "data_synth")
OURS = (*PACKAGES, "verl", "hydra_plugins", "astra_verl_recipes", "tests")

# Every astra name the plugin registers into verl (and our own hook registry).
EXPECTED = {
    "agent loops": {"astra_tool_agent"},
    "reward managers": {"astra_f1", "astra_recall", "astra_precision", "astra_bfcl", "astra_tau"},
    "platforms": {"cpu"},
    "rollout backends": {"hf_cpu"},
    "tool parsers": {"astra_hermes"},
    "hooks": {"astra_default", "scripted_user_turns", "llm_user_turns", "bfcl_multi_turn", "tau_user"},
}


def all_modules() -> list[str]:
    """Every module of our packages, found on disk without importing any (pkgutil.walk_packages
    would import the packages); `__main__` modules run a CLI and are left out."""
    names = []
    for package in PACKAGES:
        root = Path(importlib.util.find_spec(package).origin).parent
        for path in root.rglob("*.py"):
            parts = path.relative_to(root.parent).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if parts[-1] != "__main__" and all(p.isidentifier() for p in parts):
                names.append(".".join(parts))
    return sorted(names)


def registered() -> dict[str, set[str]]:
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.experimental.agent_loop.tool_parser import ToolParser
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
    from verl.plugin.platform.platform_manager import PlatformRegistry
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from astra_verl.rollout.hooks import registered_hooks

    return {
        "agent loops": set(_agent_loop_registry),
        "reward managers": set(REWARD_MANAGER),
        "platforms": set(PlatformRegistry._platforms),
        "rollout backends": set(RolloutReplicaRegistry._registry),
        "tool parsers": set(ToolParser._registry),
        "hooks": set(registered_hooks()),
    }


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(f"{record.name}: {record.getMessage()}")


def check(order: list[str]) -> list[str]:
    """Import the modules of `order` in turn; the problems found (empty when all is well).

    verl's registries are read when verl was imported along the way (the plugin then ran while
    one of ours was half-loaded), or always when `order` holds every module.
    """
    collect = _Collect()
    logging.getLogger().addHandler(collect)
    problems: list[str] = []
    for name in order:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, named
            problems.append(f"importing {name} raised {type(exc).__name__}: {exc}")
    if "verl" in sys.modules or len(order) > 1:
        problems.extend(_missing_registrations())
    problems.extend(f"logged at error level: {r}" for r in collect.records)
    return problems


def _missing_registrations() -> list[str]:
    try:
        found = registered()
    except Exception as exc:  # noqa: BLE001
        return [f"reading verl's registries raised {type(exc).__name__}: {exc}"]
    return [f"{what} missing {sorted(names - found[what])}" for what, names in EXPECTED.items() if names - found[what]]


def third_party_modules() -> list[str]:
    """Modules outside ours and verl's that importing every module of ours loads (a fresh probe)."""
    probe = subprocess.run(
        [sys.executable, __file__, "--probe"], capture_output=True, text=True, check=True, timeout=600
    )
    return json.loads(probe.stdout.strip().splitlines()[-1])


def probe() -> None:
    for name in all_modules():
        importlib.import_module(name)
    print(json.dumps([m for m in list(sys.modules) if not m.startswith(OURS) and not m.startswith("__main__")]))


def walk() -> None:
    """Import every module of ours in this process; exit 1 naming each import that raised."""
    failed = []
    for name in all_modules():
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - every failure is reported, named
            failed.append(f"importing {name} raised {type(exc).__name__}: {exc}")
    print("\n".join(failed) or f"{len(all_modules())} modules imported")
    if failed:
        raise SystemExit(1)


def preload(modules: list[str]) -> None:
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001, S112 - a module the probe loaded only as a side effect
            continue
    leaked = sorted(m for m in sys.modules if m.startswith(OURS))
    if leaked:
        raise SystemExit(f"preloading third-party modules imported ours or verl's: {leaked[:5]}")


def run_forked(order: list[str]) -> dict:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: one fresh interpreter state for `first`
        os.close(read)
        try:
            problems = check(order)
        except BaseException as exc:  # noqa: BLE001
            problems = [f"{type(exc).__name__}: {exc}"]
        with os.fdopen(write, "w") as out:
            out.write(json.dumps(problems))
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as inp:
        text = inp.read()
    _, status = os.waitpid(pid, 0)
    problems = json.loads(text) if text else [f"the child died (wait status {status})"]
    return {"first": order[0], "modules": len(order), "ok": not problems, "errors": problems}


def main() -> None:
    # Run as a script, this folder comes first on sys.path, and its test folders named like our
    # packages (tests/data_synth, ...) would be found as namespace packages in their place.
    if sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
        sys.path.pop(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help="modules to import first, one process each (default: every one)")
    parser.add_argument("--orders", type=int, default=0, help="also import every module in this many random orders")
    parser.add_argument("--seed", type=int, default=0, help="seeds the random orders")
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--walk", action="store_true", help="import every module once, in this process")
    args = parser.parse_args()
    if args.probe:
        probe()
        return
    if args.walk:
        walk()
        return
    everything = all_modules()
    preload(third_party_modules())
    logging.basicConfig(level=logging.WARNING)
    for first in args.modules or everything:
        print(json.dumps(run_forked([first])), flush=True)
    rng = random.Random(args.seed)
    for _ in range(args.orders):
        order = list(everything)
        rng.shuffle(order)
        print(json.dumps(run_forked(order)), flush=True)


if __name__ == "__main__":
    main()
