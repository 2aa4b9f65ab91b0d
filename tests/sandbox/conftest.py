"""Fixtures for the sandbox tests: a warm pool per backend, shared by a test module."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_asyncio
from testkit import in_ci

from astra_foundation.sandbox import SandboxConfig, SandboxPool
from astra_foundation.sandbox.launch import bwrap_probe

BWRAP_OK, BWRAP_DETAIL = bwrap_probe()
BACKENDS = [
    pytest.param("process", id="process"),
    pytest.param("bwrap", id="bwrap", marks=[pytest.mark.bwrap]),
]


def pytest_collection_modifyitems(config, items):
    """Every test run on the bwrap backend (a `backend` argument or a pool fixture's parameter)
    needs a working bubblewrap: where it has none, the test skips saying how to install it, and
    under CI (which installs it) it runs and fails."""
    if BWRAP_OK or in_ci():
        return
    skip = pytest.mark.skip(reason=f"bubblewrap unusable ({BWRAP_DETAIL}): apt-get install bubblewrap")
    here = Path(__file__).parent
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and here in item.path.parents and "bwrap" in callspec.params.values():
            item.add_marker(skip)


# Small limits keep the hostile tests fast; every test module shares one pool per backend.
TEST_CONFIG = dict(workers=2, call_timeout_s=1.5, load_timeout_s=3.0, memory_mb=256, max_output_chars=2000)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=BACKENDS)
async def pool(request):
    async with SandboxPool(SandboxConfig(backend=request.param, **TEST_CONFIG)) as p:
        yield p


@pytest.fixture(scope="session")
def fresh_config():
    """Config for tests that need a pool of their own (they break workers)."""
    return lambda backend, **kw: SandboxConfig(backend=backend, **{**TEST_CONFIG, **kw})


@pytest_asyncio.fixture(loop_scope="module", params=BACKENDS)
async def own_pool(request, fresh_config):
    """A pool of the test's own (per backend), for tests that kill its processes."""
    async with SandboxPool(fresh_config(request.param, call_timeout_s=5.0, session_cpu_s=1)) as p:
        yield p


@pytest.fixture(params=BACKENDS)
def backend(request):
    """Each backend's name (bwrap skipped where it cannot run), for tests that start their own pools."""
    return request.param
