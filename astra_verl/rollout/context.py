"""`RolloutContext`: what one rollout worker keeps between episodes, in one place, bounded.

verl builds an `astra_tool_agent` loop per trajectory, inside an `AgentLoopWorker` that runs
every trajectory of its process on one event loop (`verl.utils.ray_utils.get_event_loop()`).
What must outlive a single episode lives here, not in module globals:

- `catalog`: the `ToolCatalog` (store handles, reward targets, argument validators, built
  toolsets), every cache of it a bounded LRU;
- `sandbox(config)`: the worker's sandbox pool, started on first use and bound to the loop;
  asking with a different config is an error (one pool serves every episode of the worker);
- `settings(trainer_config)`: the loop's settings, read once for the worker's trainer config;
- `interactions`: the verl <= 0.7 interaction files loaded, each once per worker;
- `warned_worker_tools`: whether the "worker-wide tools are ignored" warning was given.

A loop receives its context (`context=` when built by hand: tests, benchmarks, the BFCL replay);
built by verl, it takes `worker_context(loop)`, the one context of its event loop. Contexts of
loops that were closed are shut down the next time a context is asked for. The reward managers
that run sandboxed checks (`astra_bfcl`) share the context of their event loop.
"""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

from astra_foundation.sandbox import Sandbox, SandboxConfig, SandboxPool

from .config import RolloutSettings, read_settings
from .toolset import ToolCatalog
from .verl_interaction import Interactions


class RolloutContext:
    """See the module docstring. `sandbox` may be given (a test double, an instrumented pool)."""

    def __init__(self, *, sandbox: Sandbox | None = None, catalog: ToolCatalog | None = None):
        self.catalog = catalog or ToolCatalog()
        self._pool: Sandbox | None = sandbox
        self._owns_pool = sandbox is None
        self._settings: tuple[Any, RolloutSettings] | None = None  # (trainer config, its settings)
        self.interactions = Interactions()
        self.warned_worker_tools = False

    def settings(self, trainer_config: Any) -> RolloutSettings:
        """The settings of `trainer_config`, read once: verl hands every loop of a worker the same object."""
        if self._settings is None or self._settings[0] is not trainer_config:
            self._settings = (trainer_config, read_settings(trainer_config))
        return self._settings[1]

    def sandbox(self, config: SandboxConfig | None = None) -> Sandbox:
        """The worker's sandbox pool, created with `config` on first use (call it from the worker's loop)."""
        if config is None and self._pool is not None and not (self._owns_pool and self._pool.closed):
            return self._pool
        config = config or SandboxConfig()
        if self._pool is None or (self._owns_pool and self._pool.closed):
            self._pool = SandboxPool(config)
            self._owns_pool = True
        elif self._owns_pool and self._pool.config != config:
            raise ValueError(
                "this worker's sandbox pool was started with a different config: "
                f"{self._pool.config} != {config}; one pool serves every episode of a worker"
            )
        return self._pool

    async def aclose(self) -> None:
        """Close the pool this context started (a given sandbox belongs to whoever gave it)."""
        if self._owns_pool and self._pool is not None:
            await self._pool.aclose()
        self._pool = None

    def terminate(self) -> None:
        """Kill the pool's processes without an event loop (for contexts whose loop is gone)."""
        if self._owns_pool and isinstance(self._pool, SandboxPool):
            self._pool.terminate()
        self._pool = None


_CONTEXTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, RolloutContext] = weakref.WeakKeyDictionary()


def worker_context(loop: asyncio.AbstractEventLoop | None = None) -> RolloutContext:
    """The context of `loop` (default: the running loop), created on first use."""
    loop = loop or asyncio.get_running_loop()
    for other, ctx in list(_CONTEXTS.items()):
        if other.is_closed():
            ctx.terminate()
            del _CONTEXTS[other]
    ctx = _CONTEXTS.get(loop)
    if ctx is None:
        ctx = _CONTEXTS[loop] = RolloutContext()
    return ctx


def drop_worker_context(loop: asyncio.AbstractEventLoop) -> RolloutContext | None:
    """Forget `loop`'s context (the caller closes it); the next `worker_context(loop)` is fresh."""
    return _CONTEXTS.pop(loop, None)
