"""τ-bench's tools and databases inside a sandbox session (imported there, never by the host).

The `tau_bench` family's tool sources (`tau_bench.tool_source`) import this module and call
`invoke`; it runs τ-bench's own tool class (`Tool.invoke(data=..., **kwargs)`) against this
session's copy of the domain database, exactly as τ-bench's `Env.step` does (an exception
becomes the observation "Error: <message>"). A domain's database is loaded once per process by
τ-bench's own `load_data` (`database`): a sandbox worker that preloads `load_databases`
(`astra.sandbox.preload: ["env_registry.families.tau_sandbox:load_databases"]`) loads both domains
before it forks sessions, and each session deep-copies its domain's database on its first call
(fresh state per episode; nothing is written outside the session). Importing this module itself
does nothing (the host may import it).

τ-bench's package `__init__`s import its agents and its LLM user simulator, and through them
`litellm` (with a network fetch at import) — none of which a tool uses. So the packages
`tau_bench`, `tau_bench.envs` and `tau_bench.envs.<domain>` are registered here as bare package
modules (found by the import system, their `__init__` not run); the tool and data modules below
them import unchanged. Standard library only otherwise: the sandbox exposes `tau_bench` and
`env_registry`, nothing else.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import importlib.util
import json
import sys
from typing import Any

DOMAINS = ("retail", "airline")  # the domains τ-bench ships; a new one is data in `tau_bench.DOMAINS`
_databases: dict[str, dict[str, Any]] = {}  # per process: the worker's preloaded, pristine copies
_session: dict[str, dict[str, Any]] = {}  # per session: the episode's working copies


def _bare_package(name: str) -> None:
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError(
            f"{name} is not an importable package here; is tau_bench installed and in astra.sandbox.packages?"
        )
    sys.modules[name] = importlib.util.module_from_spec(spec)


def domain_module(domain: str, leaf: str) -> Any:
    """`tau_bench.envs.<domain>.<leaf>` (e.g. `tools`, `data`), imported without τ-bench's package
    `__init__`s (see the module docstring)."""
    for name in ("tau_bench", "tau_bench.envs", f"tau_bench.envs.{domain}"):
        _bare_package(name)
    return importlib.import_module(f"tau_bench.envs.{domain}.{leaf}")


def database(domain: str) -> dict[str, Any]:
    """The domain's pristine database (τ-bench's `load_data()`), loaded once per process."""
    if domain not in _databases:
        _databases[domain] = domain_module(domain, "data").load_data()
    return _databases[domain]


def load_databases() -> None:
    """Every domain's database, loaded once: the sandbox worker calls it before forking sessions
    (`astra.sandbox.preload` entry `env_registry.families.tau_sandbox:load_databases`). A function,
    not import-time work: the host imports this module without τ-bench installed."""
    for domain in DOMAINS:
        database(domain)


def _tools(domain: str) -> dict[str, Any]:
    return {cls.get_info()["function"]["name"]: cls for cls in domain_module(domain, "tools").ALL_TOOLS}


def session_data(domain: str) -> dict[str, Any]:
    """This session's working database (a deep copy of the preloaded one, made on first use)."""
    if domain not in _session:
        _session[domain] = copy.deepcopy(database(domain))
    return _session[domain]


def invoke(domain: str, tool: str, kwargs: dict[str, Any]) -> str:
    """τ-bench's tool `tool` on this session's database, rendered as τ-bench's `Env.step` does."""
    cls = _tools(domain)[tool]
    try:
        return cls.invoke(data=session_data(domain), **kwargs)
    except Exception as exc:  # noqa: BLE001 - τ-bench's Env.step turns any tool error into the observation
        return f"Error: {exc}"


def state_digest(domain: str) -> str:
    """sha256 of this session's database as canonical JSON (sorted keys, list order kept, 1 and
    1.0 told apart, as τ-bench's `to_hashable` keeps them). τ-bench's own hash cannot run here (its
    module imports litellm); the agreement test checks that rewards from both agree task by task."""
    text = json.dumps(session_data(domain), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
