"""Reading verl's trainer config, as the rollout, the reward and the platform all do.

A trainer config reaches our code as an OmegaConf node (inside verl) or as plain dicts (tests,
the evaluation CLIs); `select_key` reads a dotted key from either.
"""

from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

__all__ = ["select_key"]


def select_key(config: Any, key: str) -> Any:
    """The value of dotted `key` in a trainer config (an OmegaConf node or plain dicts), as plain
    containers; None when absent."""
    if OmegaConf.is_config(config):
        node = OmegaConf.select(config, key, default=None)
        return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    node = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
