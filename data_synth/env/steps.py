"""The environment pipeline's steps, built from its settings (`config.EnvConfig`).

Each step is one `data_synth.pipeline.Step` (configuration only in the object, every record in
and out typed, `records.py`); its class lives with the logic it runs, one module per step:

    env.decompose  Seed -> QA              decompose.Decompose
    env.necessity  QA -> Labeled           necessity.LabelNecessity   (judge.temperature)
    env.verify     Labeled -> Scored       verify.Verify              (judge.temperature)
    env.select     Scored -> Selected      verify.Select              (the run's threshold: verify.*)
    env.tools      Selected -> Tooled      tools.SynthesizeTools      (tools.*)
    env.merge      Tooled -> Merged        merge.MergeTools           (merge.retries)
    env.publish    Merged -> Published     publish.Publish

What a step may use besides its input is its `EnvContext` (`context.py`): `ctx.llm`,
`ctx.sandbox` (tools, merge), `ctx.store` (publish).
"""

from __future__ import annotations

from data_synth.env.config import EnvConfig
from data_synth.env.decompose import Decompose
from data_synth.env.merge import MergeTools
from data_synth.env.necessity import LabelNecessity
from data_synth.env.publish import Publish
from data_synth.env.tools import SynthesizeTools
from data_synth.env.verify import Select, Verify
from data_synth.pipeline import Step

__all__ = ["Publish", "Select", "merge", "necessity", "qa_chain", "tool_chain", "tools", "verify"]


def decompose(cfg: EnvConfig) -> Decompose:
    return Decompose()


def necessity(cfg: EnvConfig) -> LabelNecessity:
    return LabelNecessity(cfg.judge.temperature)


def verify(cfg: EnvConfig) -> Verify:
    return Verify(cfg.judge.temperature)


def tools(cfg: EnvConfig) -> SynthesizeTools:
    t = cfg.tools
    return SynthesizeTools(
        inner_retries=t.inner_retries,
        outer_retries=t.outer_retries,
        complexity_scaling=t.complexity_scaling,
        require_grounded_values=t.require_grounded_values,
    )


def merge(cfg: EnvConfig) -> MergeTools:
    return MergeTools(cfg.merge.retries)


def qa_chain(cfg: EnvConfig) -> list[Step]:
    """decompose > necessity > verify: streamed per record up to the select barrier."""
    return [decompose(cfg), necessity(cfg), verify(cfg)]


def tool_chain(cfg: EnvConfig) -> list[Step]:
    """tools > merge: streamed per selected record."""
    return [tools(cfg), merge(cfg)]
