"""All settings of the trajectory pipeline, one model per step, readable from YAML.

    ingest:   {min_tools: 3, drop_invalid_tools: true}
    propose:  {samples: 1, max_chains: 12, max_len: 5}
    graph:    {alpha: 0.5, llm_min: 0.5, compat_min: 0.3}
    chains:   {min_len: 2, max_len: 5, per_start: 3, attempts_factor: 4, seed: 0}
    verify:   {votes: 3, back_translate: true, match: exact}
    tasks:    {per_chain: 2, per_server: 3, augment: [diverse, complicate, persona], personas: null,
               thresholds: {question_quality: 3, scenario_realism: 3, tool_necessity: 4}}
    variants: {unanswerable: 0.0, missing_value: 0.0, missing_function: 0.0, seed: 0, otherwise: "..."}
    interact: {max_llm_calls: 20, max_parallel_calls: 8, task_timeout_s: 600, failure_rate: 0.2, backend: simulated, ...}
    judge:    {threshold: 0.7, min_per_dim: {}, samples: 1}
    export:   {system_prompt: true, parallel_calls: keep}
    concurrency: 64

Every section is a strict settings model (`astra_foundation.strict.StrictModel`; the reading is
`data_synth.pipeline.settings.PipelineSettings`, shared with `data_synth env`): a key it does not
know, or a value of the wrong type, is an error naming the section, the key and the known keys.
"""

from __future__ import annotations

from pydantic import Field

from data_synth.pipeline.settings import PipelineSettings
from data_synth.traj.chains import ChainConfig
from data_synth.traj.export_sft import SFTExportConfig
from data_synth.traj.graph import GraphConfig
from data_synth.traj.ingest import IngestConfig
from data_synth.traj.interact import InteractConfig
from data_synth.traj.judge import JudgeConfig
from data_synth.traj.propose import ProposeConfig
from data_synth.traj.tasks import TaskConfig
from data_synth.traj.variants import VariantsConfig
from data_synth.traj.verify_chains import VerifyConfig


class TrajConfig(PipelineSettings):
    section = "traj config"

    ingest: IngestConfig = Field(default_factory=IngestConfig)
    propose: ProposeConfig = Field(default_factory=ProposeConfig)
    graph: GraphConfig = Field(default_factory=GraphConfig)
    chains: ChainConfig = Field(default_factory=ChainConfig)
    verify: VerifyConfig = Field(default_factory=VerifyConfig)
    tasks: TaskConfig = Field(default_factory=TaskConfig)
    variants: VariantsConfig = Field(default_factory=VariantsConfig)  # off: every share 0
    interact: InteractConfig = Field(default_factory=InteractConfig)
    judge: JudgeConfig = Field(default_factory=JudgeConfig)
    export: SFTExportConfig = Field(default_factory=SFTExportConfig)
    concurrency: int = 64
