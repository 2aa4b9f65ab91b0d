"""What the environment steps run with: an LLM client and a sandbox pool, built per process.

`EnvContextFactory` is a picklable recipe (settings only), so the Ray runner can send it to
its workers, where each builds its own client (and response-cache connection) and sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass

from astra_foundation.llm import LLMConfig, build_client
from astra_foundation.sandbox import SandboxConfig, SandboxPool
from data_synth.pipeline import StepContext


@dataclass
class EnvContextFactory:
    llm: LLMConfig
    cache_path: str | None = None
    sandbox: SandboxConfig | None = None

    async def __call__(self) -> StepContext:
        llm = build_client(self.llm, cache_path=self.cache_path)
        sandbox = SandboxPool(self.sandbox or SandboxConfig())
        return StepContext(llm=llm, sandbox=sandbox)
