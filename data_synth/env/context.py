"""What the environment steps run with besides their input: `EnvContext`.

    ctx.llm       the synthesis model (every LLM step)
    ctx.sandbox   a `SandboxPool` (tools: the sandbox check; merge: the golden-call replay)
    ctx.store     the `EnvStore` environments are published into (publish only; opened by the run)

`EnvContextFactory` is a picklable recipe (settings only), so the Ray runner can send it to
its workers, where each builds its own client (and response-cache connection) and sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from astra_foundation.llm import LLMConfig, build_client
from astra_foundation.sandbox import SandboxConfig, SandboxPool
from data_synth.pipeline import StepContext

if TYPE_CHECKING:
    from env_registry.store import EnvStore


@dataclass
class EnvContext(StepContext):
    sandbox: SandboxPool | None = None
    store: EnvStore | None = None

    async def aclose(self) -> None:
        """Close the client and the sandbox; the store belongs to whoever opened it."""
        await super().aclose()
        if self.sandbox is not None:
            await self.sandbox.aclose()


@dataclass
class EnvContextFactory:
    llm: LLMConfig
    cache_path: str | None = None
    sandbox: SandboxConfig | None = None

    async def __call__(self) -> EnvContext:
        llm = build_client(self.llm, cache_path=self.cache_path)
        sandbox = SandboxPool(self.sandbox or SandboxConfig())
        return EnvContext(llm=llm, sandbox=sandbox)
