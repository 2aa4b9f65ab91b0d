"""All settings of the environment pipeline, one model per step, readable from YAML
(`python -m data_synth env run --config FILE --set SECTION.KEY=VALUE`; a flag given on the command
line wins over both).

    inputs:   {mode: domain, input: domains.jsonl, samples: 1, hops: "3..5", language: en, limit: null, offset: 0}
    judge:    {temperature: 0.0}                         # necessity labels and the four verify judges
    verify:   {percentile: 90.0, min_quality: 0.0}       # the select threshold
    tools:    {inner_retries: 5, outer_retries: 15, complexity_scaling: true, require_grounded_values: true}
    merge:    {retries: 20}
    publish:  {store: null, val_fraction: 0.1, export: true, allow_scripted: false}
    sandbox:  {workers: null, call_timeout_s: 5.0}
    concurrency: 64

Every section is a strict settings model (`data_synth.pipeline.settings.PipelineSettings`, shared
with `data_synth traj`): a key it does not know, or a value of the wrong type, is an error naming
the file, the section, the key and the known keys. `store: null` is RUN_DIR/envs; paths are read
from the working directory, as the flags' are.
"""

from __future__ import annotations

from pydantic import Field

from astra_foundation.strict import StrictModel
from data_synth.env.records import Mode
from data_synth.pipeline.settings import PipelineSettings


class InputSettings(StrictModel):
    """The input records decompose reads (ASTRA's "seeds": a domain, a context passage, a question,
    a taxonomy leaf; the section was named `seeds`, a word every other command uses for a random seed)."""

    section = "env config: inputs"
    mode: Mode | None = None
    input: str | None = None  # domains/context/questions .jsonl or a taxonomy .json
    samples: int = 1  # tasks drawn per input
    hops: str | None = None  # "MIN..MAX" sub-questions per task (None: 3..5 for context, 1..6 otherwise)
    language: str = "en"
    limit: int | None = None  # the first N inputs (after offset)
    offset: int = 0


class JudgeSettings(StrictModel):
    section = "env config: judge"
    temperature: float = 0.0


class SelectSettings(StrictModel):
    """Keep instances with quality >= the `percentile` of the run's scores, at least `min_quality`
    (90 is ASTRA's README; its scripts use an absolute 0.85: percentile 0, min_quality 0.85)."""

    section = "env config: verify"
    percentile: float = 90.0
    min_quality: float = 0.0


class ToolSettings(StrictModel):
    section = "env config: tools"
    inner_retries: int = 5  # implementation tries per design
    outer_retries: int = 15  # designs per sub-question
    complexity_scaling: bool = True
    require_grounded_values: bool = True  # refuse call values that appear nowhere in the request


class MergeSettings(StrictModel):
    section = "env config: merge"
    retries: int = 20  # tries per cluster merge


class PublishSettings(StrictModel):
    section = "env config: publish"
    store: str | None = None  # env_registry store (None: RUN_DIR/envs)
    val_fraction: float = 0.1
    export: bool = True  # train/val parquet
    allow_scripted: bool = False  # also store environments a dry run made


class SandboxSettings(StrictModel):
    section = "env config: sandbox"
    workers: int | None = None  # warm workers (None: min(4, CPUs))
    call_timeout_s: float = 5.0


class EnvConfig(PipelineSettings):
    section = "env config"

    renamed = {"seeds": "inputs"}  # old section -> new: refused, naming the new one
    inputs: InputSettings = Field(default_factory=InputSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
    verify: SelectSettings = Field(default_factory=SelectSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    merge: MergeSettings = Field(default_factory=MergeSettings)
    publish: PublishSettings = Field(default_factory=PublishSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    concurrency: int = 64  # records in flight per step
