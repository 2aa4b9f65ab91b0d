"""The environment pipeline end to end: what each step reads, the context it runs with, what is
recorded in the manifest, why a run failed. The CLI (`cli.py`) is a thin layer over `EnvRun`.

Every step reads the previous step's outputs from the run directory and appends its envelopes
there (`<run_dir>/env.<step>[.shard-I-of-N].jsonl`), so any step, or `run`, can be killed and
rerun: finished records are skipped, unfinished ones (and `error` ones) are redone.

    env.decompose  seeds.jsonl (from inputs.input)    env.necessity  env.decompose outputs
    env.verify     env.necessity outputs             env.select     env.verify outputs (a barrier:
                                                                    the percentile needs every score)
    env.tools      env.select outputs                env.merge      env.tools outputs
    env.publish    env.merge outputs -> the store, parquet/
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from astra_foundation.clikit import UsageError
from astra_foundation.llm import LLMConfig
from astra_foundation.sandbox import SandboxConfig
from data_synth.env import steps as S
from data_synth.env.config import EnvConfig
from data_synth.env.context import EnvContext, EnvContextFactory
from data_synth.env.publish import export_parquet
from data_synth.env.records import QA, Labeled, Merged, Published, Scored, Seed, Selected, Tooled
from data_synth.env.report import STEPS
from data_synth.env.seeds import load_seeds, parse_hops
from data_synth.env.verify import quality_threshold
from data_synth.pipeline import RunStats, Shard, Step, read_outputs, run_chain, run_step
from data_synth.pipeline.manifest import file_digest
from data_synth.pipeline.ray_runner import run_step_here_or_on_ray
from data_synth.pipeline.run_options import answered_by, failures, step_settings
from env_registry.store import EnvStore

# The step files each command writes, in pipeline order (`verify` also runs `select`).
COMMAND_STEPS: dict[str, list[str]] = {
    "decompose": ["env.decompose"],
    "necessity": ["env.necessity"],
    "verify": ["env.verify", "env.select"],
    "tools": ["env.tools"],
    "merge": ["env.merge"],
    "publish": ["env.publish"],
    "run": STEPS,
}
CACHE_FILE = "llm_cache.sqlite"


def save_seeds(run_dir: Path, seeds: list[Seed]) -> None:
    """Add the seeds to RUN_DIR/seeds.jsonl (the first line of a key stays), atomically."""
    path = run_dir / "seeds.jsonl"
    known: dict[str, str] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                known[json.loads(line)["key"]] = line
    for s in seeds:
        known.setdefault(s.key, s.model_dump_json())
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(line + "\n" for line in known.values()), encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class EnvRun:
    """One invocation: the steps asked for, sharing one local context (LLM client + sandbox)."""

    run_dir: Path
    cfg: EnvConfig
    factory: EnvContextFactory
    shard: Shard = field(default_factory=lambda: Shard(0, 1))
    progress: bool = True
    ray_workers: int = 0  # > 0: the LLM steps run on Ray actors
    sample: bool = False  # inputs.input is the bundled sample (said so in the seeds line)
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase of `synthesize`
    stats: list[RunStats] = field(default_factory=list)  # what each step did in this invocation
    input_problems: list[str] = field(default_factory=list)  # input lines rejected by load_seeds
    published: int | None = None  # environments of this run in the store (after publish)
    _seeds: list[Seed] | None = field(default=None, init=False, repr=False)
    _ctx: EnvContext | None = field(default=None, init=False, repr=False)

    async def context(self) -> EnvContext:
        if self._ctx is None:
            self._ctx = await self.factory()
        return self._ctx

    async def aclose(self) -> None:
        if self._ctx is not None:
            await self._ctx.aclose()
            self._ctx = None

    def _report(self, stats: RunStats) -> None:
        self.stats.append(stats)
        print(stats.line(), flush=True)

    async def stage(self, step: Step, inputs: list, *, local: bool = False) -> None:
        stats = await run_step_here_or_on_ray(
            step,
            inputs,
            self.run_dir,
            context=self.context,
            context_factory=self.factory,
            ray_workers=0 if local else self.ray_workers,
            concurrency=self.cfg.concurrency,
            concurrency_per_worker=self.cfg.concurrency,
            shard=self.shard,
            progress=self.progress,
        )
        self._report(stats)

    async def chain(self, steps: list[Step], inputs: list) -> None:
        """Steps back to back per record (`run_chain`); on Ray, one step after the other."""
        if self.ray_workers > 0:
            for i, step in enumerate(steps):
                step_inputs = read_outputs(self.run_dir, steps[i - 1].name, step.input_type) if i else inputs
                await self.stage(step, step_inputs)
            return
        for stats in await run_chain(
            steps,
            inputs,
            self.run_dir,
            ctx=await self.context(),
            concurrency=self.cfg.concurrency,
            shard=self.shard,
            progress=self.progress,
        ):
            self._report(stats)

    def load_inputs(self) -> list[Seed]:
        """The seeds (input records) of inputs.input (read once; raises SeedError when there are none)."""
        if self._seeds is None:
            s = self.cfg.inputs
            self._seeds = load_seeds(
                s.mode,
                s.input,
                samples=s.samples,
                hops=parse_hops(s.hops),
                language=s.language,
                limit=s.limit,
                offset=s.offset,
                problems=self.input_problems,
            )
        return self._seeds

    def seeds(self) -> list[Seed]:
        s = self.cfg.inputs
        seeds = self.load_inputs()
        save_seeds(self.run_dir, seeds)
        print(
            f"{len(seeds)} input records from {s.input} ({s.mode} mode{', bundled sample' if self.sample else ''})",
            flush=True,
        )
        for problem in self.input_problems[:10]:
            print(f"rejected input line {problem}", flush=True)
        if len(self.input_problems) > 10:
            print(f"... and {len(self.input_problems) - 10} more rejected input lines", flush=True)
        return seeds

    # -- steps, in order (each a command of the CLI) ------------------------------------------
    async def decompose(self) -> None:
        await self.stage(S.decompose(self.cfg), self.seeds())

    async def necessity(self) -> None:
        await self.stage(S.necessity(self.cfg), read_outputs(self.run_dir, "env.decompose", QA))

    async def verify(self) -> None:
        await self.stage(S.verify(self.cfg), read_outputs(self.run_dir, "env.necessity", Labeled))
        await self.select()

    async def select(self) -> None:
        v = self.cfg.verify
        scored = read_outputs(self.run_dir, "env.verify", Scored)
        threshold = quality_threshold([s.quality for s in scored], percentile=v.percentile, min_quality=v.min_quality)
        print(f"quality threshold {threshold:.3f} (P{v.percentile:g} of {len(scored)} scores, floor {v.min_quality})")
        await self.stage(S.Select(threshold, len(scored), v.percentile), scored, local=True)

    async def tools(self) -> None:
        await self.stage(S.tools(self.cfg), read_outputs(self.run_dir, "env.select", Selected))

    async def merge(self) -> None:
        await self.stage(S.merge(self.cfg), read_outputs(self.run_dir, "env.tools", Tooled))

    async def synthesize(self) -> None:
        """Every step up to merge, as `run` does them: decompose > necessity > verify streamed
        per record, the select barrier (the percentile needs every score), tools > merge streamed."""
        t0 = time.perf_counter()
        await self.chain(S.qa_chain(self.cfg), self.seeds())
        t1 = time.perf_counter()
        await self.select()
        selected = read_outputs(self.run_dir, "env.select", Selected)
        t2 = time.perf_counter()
        await self.chain(S.tool_chain(self.cfg), selected)
        self.timings = {"qa_chain": t1 - t0, "select": t2 - t1, "tool_chain": time.perf_counter() - t2}

    def store_path(self) -> Path:
        return Path(self.cfg.publish.store) if self.cfg.publish.store else self.run_dir / "envs"

    async def publish(self) -> None:
        p = self.cfg.publish
        if self.shard.count > 1:
            print(
                f"shard {self.shard}: skipping publish; run `python -m data_synth env publish --out "
                f"{self.run_dir}` once all shards have finished",
                flush=True,
            )
            return
        store_path = self.store_path()
        merged = read_outputs(self.run_dir, "env.merge", Merged)
        scripted = sorted({s for r in merged if (s := (r.env.get("provenance") or {}).get("scripted"))})
        if scripted and not p.allow_scripted:
            raise UsageError(
                f"publish: environments of this run were made by a dry run ({', '.join(scripted)} answered, not a "
                f"model); they go into {store_path} only when asked: `python -m data_synth env publish --out "
                f"{self.run_dir} --allow-scripted`"
            )
        with EnvStore.open(store_path, "a", allow_scripted=p.allow_scripted) as store:
            stats = await run_step(
                S.Publish(), merged, self.run_dir, ctx=EnvContext(store=store), progress=self.progress
            )
            self._report(stats)
            ids = sorted({r.env_id for r in read_outputs(self.run_dir, "env.publish", Published)})
            self.published = len(ids)
            print(f"store {store_path}: {len(store)} environments ({len(ids)} from this run)", flush=True)
            if p.export and ids:
                folder = export_parquet(store, ids, self.run_dir / "parquet", val_fraction=p.val_fraction)
                print(f"parquet: {folder}/train.parquet, {folder}/val.parquet", flush=True)

    async def run(self, command: str) -> None:
        """The command's steps (`run`: synthesize, then publish); the local context is closed after."""
        try:
            for name in ["synthesize", "publish"] if command == "run" else [command]:
                await getattr(self, name)()
        finally:
            await self.aclose()

    # -- what the run directory records, and why a command failed -------------------------------
    def manifest_settings(self, command: str) -> dict[str, dict[str, Any]]:
        """What decides each of the command's steps' records (see data_synth.pipeline.manifest)."""
        cfg, model = self.cfg, {"llm_model": answered_by(self.factory.llm)}
        judge = {**model, "judge_temperature": cfg.judge.temperature}
        s, t = cfg.inputs, cfg.tools
        table = {
            "env.decompose": lambda: {
                **model,
                "mode": s.mode,
                "input": str(Path(s.input).resolve()),
                "input_digest": file_digest(s.input),
                "samples": s.samples,
                "hops": s.hops,
                "language": s.language,
            },
            "env.necessity": lambda: judge,
            "env.verify": lambda: judge,
            "env.select": lambda: {"percentile": cfg.verify.percentile, "min_quality": cfg.verify.min_quality},
            "env.tools": lambda: {
                **model,
                "inner_retries": t.inner_retries,
                "outer_retries": t.outer_retries,
                "complexity_scaling": t.complexity_scaling,
                "require_grounded_values": t.require_grounded_values,
                "call_timeout_s": cfg.sandbox.call_timeout_s,
            },
            "env.merge": lambda: {**model, "merge_retries": cfg.merge.retries},
            "env.publish": lambda: {"store": str(self.store_path().resolve())},
        }
        return step_settings(COMMAND_STEPS[command], table)

    def problems(self, command: str) -> list[str]:
        """Why this invocation did not fully succeed (empty when it did)."""
        bad = len(self.input_problems)
        return failures(
            self.stats,
            bad_inputs=f"{bad} input lines were rejected (listed above); fix them and rerun" if bad else None,
            nothing_made="the run produced no environment; the funnel above shows where the records fell out"
            if command == "run" and self.published == 0
            else None,
        )


def context_factory(cfg: EnvConfig, llm: LLMConfig, run_dir: Path) -> EnvContextFactory:
    """The recipe of this run's contexts: the synthesis model, the response cache in the run
    directory, the sandbox of `cfg.sandbox`."""
    sandbox_kw: dict[str, Any] = {"call_timeout_s": cfg.sandbox.call_timeout_s}
    if cfg.sandbox.workers:
        sandbox_kw["workers"] = cfg.sandbox.workers
    return EnvContextFactory(llm=llm, cache_path=str(run_dir / CACHE_FILE), sandbox=SandboxConfig(**sandbox_kw))
