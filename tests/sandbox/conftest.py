"""Fixtures for the sandbox tests: a warm pool per backend, shared by a test module."""

from __future__ import annotations

import pytest
import pytest_asyncio

from astra_foundation.sandbox import SandboxConfig, SandboxPool
from astra_foundation.sandbox.launch import bwrap_probe

BWRAP_OK, BWRAP_DETAIL = bwrap_probe()
BACKENDS = [
    pytest.param("process", id="process"),
    pytest.param(
        "bwrap",
        id="bwrap",
        marks=[pytest.mark.bwrap, pytest.mark.skipif(not BWRAP_OK, reason=f"bubblewrap unusable: {BWRAP_DETAIL}")],
    ),
]

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
