"""Fixtures of the env_registry tests: generated environments and a store holding them."""

from __future__ import annotations

import pytest

from env_registry.families.procedural import generate
from env_registry.store import EnvStore


@pytest.fixture(scope="session")
def envs():
    """60 procedural environments (all domains and scenario types occur)."""
    return generate(60, seed=0)


@pytest.fixture(scope="session")
def store_path(tmp_path_factory, envs):
    """A read-only-by-convention store holding `envs` (tests that write make their own)."""
    path = tmp_path_factory.mktemp("store") / "envs"
    with EnvStore.open(path, "a") as s:
        s.add_many(envs)
    return path
