"""The trajectory pipeline end to end: what each step reads, the context it runs with, the
funnel, the export. The CLI (`cli.py`) is a thin layer over these functions.

Every step reads the previous steps' outputs from the run directory and appends its envelopes
there (`<run_dir>/traj.<step>[.shard-I-of-N].jsonl`), so any step, or `run`, can be killed and
rerun: finished records are skipped, unfinished ones (and `error` ones) are redone.

    traj.ingest   input files            traj.graph    traj.ingest outputs
    traj.chains   traj.graph outputs     traj.verify   traj.chains outputs
    traj.tasks    one seed per verified chain and one per server
    traj.augment  one job per (base task, mode)
    traj.score    base tasks and augmented tasks
    traj.variants one job per (scored task, variant) its draw picks (`variants.py`; none by default)
    traj.interact traj.score and traj.variants outputs
    traj.judge    traj.interact outputs
    export        traj.judge outputs -> sft.parquet, trajectories.jsonl, funnel.json, report
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_foundation.llm import LLMConfig, build_client
from data_synth.pipeline import Funnel, RunStats, Shard, Step, read_outputs
from data_synth.pipeline.ray_runner import run_step_here_or_on_ray
from data_synth.traj import steps as S
from data_synth.traj.config import TrajConfig
from data_synth.traj.export_sft import write_sft, write_trajectories
from data_synth.traj.ingest import read_sources
from data_synth.traj.records import (
    AugmentJob,
    Chain,
    GraphRecord,
    JudgedTrajectory,
    ScoredTask,
    Server,
    Task,
    TaskSeed,
    Trajectory,
    VariantJob,
    VerifiedChain,
)
from data_synth.traj.report import write_report
from data_synth.traj.tasks import load_personas
from data_synth.traj.variants import jobs

log = logging.getLogger(__name__)

STEP_ORDER = (
    "traj.ingest",
    "traj.graph",
    "traj.chains",
    "traj.verify",
    "traj.tasks",
    "traj.augment",
    "traj.score",
    "traj.variants",
    "traj.interact",
    "traj.judge",
)
CACHE_FILE = "llm_cache.sqlite"


@dataclass
class ContextFactory:
    """Builds a step context (LLM clients, servers, personas); picklable, so Ray workers build
    their own. `agent` / `judge` / `user` default to the synthesis model."""

    run_dir: str
    llm: LLMConfig | None = None
    agent: LLMConfig | None = None
    judge: LLMConfig | None = None
    user: LLMConfig | None = None
    personas: str | None = None
    responders: dict[str, Any] = field(default_factory=dict)  # tests: role -> scripted responder

    def _client(self, cfg: LLMConfig | None, role: str):
        responder = self.responders.get(role)
        if cfg is None and responder is None:
            return None
        return build_client(cfg or LLMConfig(), cache_path=Path(self.run_dir) / CACHE_FILE, responder=responder)

    async def __call__(self) -> S.TrajContext:
        return S.TrajContext(
            llm=self._client(self.llm, "llm"),
            run_dir=Path(self.run_dir),
            agent=self._client(self.agent, "agent"),
            judge=self._client(self.judge, "judge"),
            user=self._client(self.user, "user"),
            servers=load_servers(self.run_dir),
            personas=load_personas(self.personas),
        )


def _unique(records: list[Task]) -> list[Task]:
    """First record per key, in order."""
    first: dict[str, Task] = {}
    for r in records:
        first.setdefault(r.key, r)
    return list(first.values())


def load_servers(run_dir: str | Path) -> dict[str, Server]:
    return {s.server_id: s for s in read_outputs(run_dir, "traj.ingest", Server)}


@dataclass
class Runner:
    run_dir: Path
    cfg: TrajConfig
    factory: ContextFactory
    shard: Shard = field(default_factory=lambda: Shard(0, 1))
    progress: bool = True
    ray_workers: int = 0  # > 0: run LLM steps on Ray actors
    _ctx: S.TrajContext | None = field(default=None, init=False, repr=False)

    async def context(self) -> S.TrajContext:
        if self._ctx is None:
            self._ctx = await self.factory()
        self._ctx.servers = load_servers(self.run_dir)  # ingest may have added some
        return self._ctx

    async def aclose(self) -> None:
        if self._ctx is not None:
            await self._ctx.aclose()
            self._ctx = None

    async def _run(self, step: Step, inputs: list) -> RunStats:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        stats = await run_step_here_or_on_ray(
            step,
            inputs,
            self.run_dir,
            context=self.context,
            context_factory=self.factory,
            ray_workers=0 if step.name == "traj.ingest" else self.ray_workers,
            concurrency=self.cfg.concurrency,
            concurrency_per_worker=max(1, self.cfg.concurrency // max(1, self.ray_workers)),
            shard=self.shard,
            progress=self.progress,
        )
        log.debug(stats.line())
        return stats

    # -- steps, in order --------------------------------------------------------------------
    async def ingest(self, paths: list[str], *, fmt: str | None = None, domain: str = "") -> RunStats:
        if not paths:
            raise ValueError("ingest needs at least one input file or folder")
        sources = read_sources(paths, fmt=fmt, domain=domain)
        return await self._run(S.IngestStep(self.cfg.ingest), sources)

    async def graph(self) -> RunStats:
        servers = read_outputs(self.run_dir, "traj.ingest", Server)
        return await self._run(S.GraphStep(self.cfg.propose, self.cfg.graph), servers)

    async def chains(self) -> RunStats:
        return await self._run(S.ChainsStep(self.cfg.chains), read_outputs(self.run_dir, "traj.graph", GraphRecord))

    async def verify(self) -> RunStats:
        return await self._run(S.VerifyStep(self.cfg.verify), read_outputs(self.run_dir, "traj.chains", Chain))

    def task_seeds(self) -> list[TaskSeed]:
        seeds = []
        if self.cfg.tasks.per_chain > 0:
            for c in read_outputs(self.run_dir, "traj.verify", VerifiedChain):
                seeds.append(
                    TaskSeed(key=f"chain:{c.key}", server_id=c.server_id, source="chain", chain_id=c.key, tools=c.tools)
                )
        if self.cfg.tasks.per_server > 0:
            for s in read_outputs(self.run_dir, "traj.ingest", Server):
                seeds.append(TaskSeed(key=f"server:{s.server_id}", server_id=s.server_id, source="server"))
        return seeds

    async def tasks(self) -> RunStats:
        return await self._run(S.TasksStep(self.cfg.tasks), self.task_seeds())

    def base_tasks(self) -> list[Task]:
        """The tasks step's outputs, one per key (two seeds can write the same query)."""
        return _unique(read_outputs(self.run_dir, "traj.tasks", Task))

    def augment_jobs(self) -> list[AugmentJob]:
        return [
            AugmentJob(key=f"{t.key}:{m}", task=t, mode=m) for t in self.base_tasks() for m in self.cfg.tasks.augment
        ]

    async def augment(self) -> RunStats:
        return await self._run(S.AugmentStep(self.cfg.tasks), self.augment_jobs())

    def all_tasks(self) -> list[Task]:
        augmented = read_outputs(self.run_dir, "traj.augment", Task)
        return _unique(self.base_tasks() + augmented)

    async def score(self) -> RunStats:
        return await self._run(S.ScoreStep(self.cfg.tasks), self.all_tasks())

    def variant_jobs(self) -> list[VariantJob]:
        return jobs(read_outputs(self.run_dir, "traj.score", ScoredTask), self.cfg.variants)

    async def variants(self) -> RunStats:
        return await self._run(S.VariantsStep(self.cfg.variants), self.variant_jobs())

    def interact_items(self) -> list[ScoredTask]:
        """The scored tasks and the variant tasks derived from them."""
        return read_outputs(self.run_dir, "traj.score", ScoredTask) + read_outputs(
            self.run_dir, "traj.variants", ScoredTask
        )

    async def interact(self) -> RunStats:
        return await self._run(S.InteractStep(self.cfg.interact, self.cfg.variants), self.interact_items())

    async def judge(self) -> RunStats:
        items = read_outputs(self.run_dir, "traj.interact", Trajectory)
        return await self._run(S.JudgeStep(self.cfg.judge), items)

    def funnel(self) -> Funnel:
        """Per-step counts; inputs are set from what each step actually reads (the pipeline is
        not linear at tasks/augment/score)."""
        f = Funnel.from_run(self.run_dir, list(STEP_ORDER))
        by = {c.step: c for c in f.steps}
        by["traj.ingest"].inputs = by["traj.ingest"].processed
        by["traj.tasks"].inputs = len(self.task_seeds())
        by["traj.augment"].inputs = len(self.augment_jobs())
        by["traj.score"].inputs = len(self.all_tasks())
        by["traj.variants"].inputs = len(self.variant_jobs())
        by["traj.interact"].inputs = len(self.interact_items())
        return f

    def export(self) -> dict[str, Any]:
        """sft.parquet, trajectories.jsonl, funnel.json, report (plots); returns the summary."""
        kept = read_outputs(self.run_dir, "traj.judge", JudgedTrajectory)
        counts = write_sft(kept, self.run_dir / "sft.parquet", self.cfg.export)
        counts["trajectories"] = write_trajectories(
            self.run_dir, self.run_dir / "trajectories.jsonl", "traj.interact", "traj.judge"
        )
        funnel = self.funnel()
        funnel.save(self.run_dir / "funnel.json")
        counts["report"] = str(write_report(self.run_dir, funnel, kept, threshold=self.cfg.judge.threshold))
        (self.run_dir / "export.json").write_text(json.dumps(counts, indent=2), encoding="utf-8")
        return counts

    async def run_all(
        self, paths: list[str], *, fmt: str | None = None, domain: str = ""
    ) -> tuple[list[RunStats], dict[str, Any]]:
        """Every step, then the export: (what each step did, the export summary)."""
        stats = [await self.ingest(paths, fmt=fmt, domain=domain)]
        for name in ("graph", "chains", "verify", "tasks", "augment", "score", "variants", "interact", "judge"):
            stats.append(await getattr(self, name)())
        return stats, self.export()
