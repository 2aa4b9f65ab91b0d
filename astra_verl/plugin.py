"""The `verl.plugins` entry point: `import verl` imports this module in every process.

verl swallows a failing plugin import at debug level (verl/__init__.py, the entry-point loop),
so a broken part of astra-verl would otherwise vanish without a trace and a run would later
fail with "Unknown reward manager" far from the cause. Every failure is therefore logged here
at error level, with its traceback, before it is re-raised.

Import rule. verl imports this module at the end of its own `__init__`, so whichever of our
modules first reaches `import verl` is still half-loaded while the modules below are imported.
Hence a module that imports verl is a leaf: the registering modules below and entry points
(CLIs, harnesses) import verl; nothing the registering modules import does, and none of them
imports another by name. Shared pieces live in verl-free modules (`rollout.call_parsing`,
`reward.sample`, ...). `tests/test_imports.py` imports every module first in a fresh process.
"""

from __future__ import annotations

import importlib
import logging

from hydra.core.plugins import Plugins

from hydra_plugins.astra_verl.astra_verl_searchpath import AstraVerlSearchPathPlugin

logger = logging.getLogger("astra_verl")

# Each module registers itself into a verl registry when imported; the comment names what.
REGISTERING_MODULES: tuple[str, ...] = (
    "astra_verl.platform.cpu",  # verl platform "cpu" (selected by VERL_PLATFORM=cpu)
    "astra_verl.rollout.tool_parser",  # tool parsers "astra_hermes" (astra_<multi_turn.format>)
    "astra_verl.rollout.agent_loop",  # agent loop "astra_tool_agent"
    "astra_verl.reward.managers",  # reward managers "astra_f1", "astra_recall", "astra_precision"
    "astra_verl.benchmarks.bfcl_reward",  # reward manager "astra_bfcl" and the hook "bfcl_multi_turn"
    "astra_verl.benchmarks.tau_reward",  # reward manager "astra_tau" and the hook "tau_user"
)


class PluginLoadError(ImportError):
    """One or more astra-verl modules failed to import; their registrations are missing."""


def load(modules: tuple[str, ...] = REGISTERING_MODULES) -> list[str]:
    """Import every registering module; log each failure at error level, then raise once."""
    failed: list[str] = []
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - re-raised below after every module was tried
            logger.error(
                "astra-verl plugin: importing %s failed (%s: %s); what it registers is missing from verl",
                name,
                type(exc).__name__,
                exc,
                exc_info=True,
            )
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
    if failed:
        raise PluginLoadError("astra-verl plugin failed to load: " + "; ".join(failed))
    return list(modules)


def register_recipe_search_path() -> None:
    """Make `+recipe=astra_*` resolve in editable installs too.

    Hydra finds search-path plugins by walking the `hydra_plugins` namespace package with
    pkgutil, which cannot see into setuptools' editable-install finder (`pip install -e .`
    leaves only a path-hook placeholder in `hydra_plugins.__path__`). Wheel installs are found
    by that scan; for editable ones the same plugin class is registered here, which Hydra
    de-duplicates. main_ppo and the SFT trainer import verl before Hydra composes.
    """
    Plugins.instance().register(AstraVerlSearchPathPlugin)


register_recipe_search_path()
load()
