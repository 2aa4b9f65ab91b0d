"""All settings of the trajectory pipeline, one dataclass per step, readable from YAML.

    ingest:   {min_tools: 3, drop_invalid_tools: true}
    propose:  {samples: 1, max_chains: 12, max_len: 5}
    graph:    {alpha: 0.5, llm_min: 0.5, compat_min: 0.3}
    chains:   {min_len: 2, max_len: 5, per_start: 3, attempts_factor: 4, seed: 0}
    verify:   {votes: 3, back_translate: true, match: exact}
    tasks:    {per_chain: 2, per_server: 3, augment: [diverse, complicate, persona], personas: null,
               thresholds: {question_quality: 3, scenario_realism: 3, tool_necessity: 4}}
    interact: {max_llm_calls: 20, task_timeout_s: 600, failure_rate: 0.2, backend: simulated, ...}
    judge:    {threshold: 0.7, min_per_dim: {}, samples: 1}
    export:   {system_prompt: true, parallel_calls: keep}
    concurrency: 64

A key the dataclasses do not know is an error naming the section and the known keys.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from data_synth.traj.chains import ChainConfig
from data_synth.traj.export_sft import SFTExportConfig
from data_synth.traj.graph import GraphConfig
from data_synth.traj.ingest import IngestConfig
from data_synth.traj.interact import InteractConfig
from data_synth.traj.judge import JudgeConfig
from data_synth.traj.propose import ProposeConfig
from data_synth.traj.tasks import TaskConfig
from data_synth.traj.verify_chains import VerifyConfig


@dataclass
class TrajConfig:
    ingest: IngestConfig = field(default_factory=IngestConfig)
    propose: ProposeConfig = field(default_factory=ProposeConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    chains: ChainConfig = field(default_factory=ChainConfig)
    verify: VerifyConfig = field(default_factory=VerifyConfig)
    tasks: TaskConfig = field(default_factory=TaskConfig)
    interact: InteractConfig = field(default_factory=InteractConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    export: SFTExportConfig = field(default_factory=SFTExportConfig)
    concurrency: int = 64

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> TrajConfig:
        raw = dict(raw or {})
        kwargs: dict[str, Any] = {}
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = set(raw) - set(fields)
        if unknown:
            raise ValueError(f"unknown config sections {sorted(unknown)}; known: {sorted(fields)}")
        for name, value in raw.items():
            f = fields[name]
            if name == "concurrency":
                kwargs[name] = int(value)
                continue
            section_cls = f.default_factory  # the section's dataclass
            known = {x.name for x in dataclasses.fields(section_cls)}
            bad = set(value or {}) - known
            if bad:
                raise ValueError(f"config section {name!r}: unknown keys {sorted(bad)}; known: {sorted(known)}")
            kwargs[name] = section_cls(**(value or {}))
        return cls(**kwargs)

    @classmethod
    def from_yaml(cls, path: str | Path | None) -> TrajConfig:
        if path is None:
            return cls()
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        if raw is not None and not isinstance(raw, dict):
            raise ValueError(f"{path}: expected a mapping of sections")
        return cls.from_dict(raw)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
