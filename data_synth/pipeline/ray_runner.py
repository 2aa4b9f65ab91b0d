"""Run a step's records across a Ray cluster (local or remote), with `run_step`'s guarantees.

Workers are async Ray actors; each builds its own `StepContext` once through the picklable
`context_factory` (its own LLM client, cache connection and sandbox) and processes batches of
records with bounded concurrency. The driver alone writes envelopes, as batches come back, so
resumability, sharding and de-duplication are exactly those of the local runner: a killed
driver or a lost worker loses only the records in flight, which a rerun processes.

    ray.init(address="auto")   # or ray.init(num_cpus=4) for a local instance
    stats = await run_step_ray(step, inputs, run_dir, context_factory=make_ctx, workers=8)

The response cache is per node: a worker opens the cache path its factory names, so on a
multi-node cluster that path should be node-local (or on a shared filesystem sqlite handles,
i.e. not NFS).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from data_synth.pipeline.records import Envelope, Record
from data_synth.pipeline.runner import (
    ContextFactory,
    RunStats,
    Step,
    StepContext,
    _count,
    pending,
    process_one,
    run_step,
)
from data_synth.pipeline.shard import Shard
from data_synth.pipeline.store import Appender, step_file


class _StepWorker:
    def __init__(self, step: Step, context_factory: ContextFactory, concurrency: int):
        self.step = step
        self.context_factory = context_factory
        self.concurrency = concurrency
        self.ctx: StepContext | None = None
        self.slots: asyncio.Semaphore | None = None

    async def process_batch(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.ctx is None:
            self.ctx = await self.context_factory()
            self.slots = asyncio.Semaphore(self.concurrency)

        async def one(row: dict[str, Any]) -> dict[str, Any]:
            async with self.slots:
                record = self.step.input_type.model_validate(row)
                env = await process_one(self.step, record, self.ctx)
                return env.model_dump(mode="json")

        return list(await asyncio.gather(*(one(r) for r in rows)))

    async def close(self) -> None:
        if self.ctx is not None:
            await self.ctx.aclose()
            self.ctx = None


async def run_step_ray(
    step: Step,
    inputs: Iterable[Record],
    run_dir: str | Path,
    *,
    context_factory: ContextFactory,
    workers: int = 2,
    concurrency_per_worker: int = 32,
    batch_size: int = 16,
    shard: Shard | None = None,
    progress: bool = True,
    num_cpus_per_worker: float = 1.0,
    resources: dict[str, float] | None = None,  # per worker, e.g. {"synth": 1}: only nodes started with it
) -> RunStats:
    import ray  # lazy: heavy, only this runner needs it

    if not ray.is_initialized():
        raise RuntimeError("run_step_ray needs Ray: call ray.init(...) (or pass --ray to the CLI) first")
    shard = shard or Shard(0, 1)
    stats = RunStats(step=step.name)
    t0 = time.monotonic()
    todo = [r.model_dump(mode="json") for r in pending(step, inputs, run_dir, shard, stats)]
    if not todo:
        stats.elapsed_s = time.monotonic() - t0
        return stats
    batches = [todo[i : i + batch_size] for i in range(0, len(todo), batch_size)]
    actor_cls = ray.remote(num_cpus=num_cpus_per_worker, resources=resources or {})(_StepWorker)
    actors = [
        actor_cls.remote(step, context_factory, concurrency_per_worker) for _ in range(min(workers, len(batches)))
    ]
    # two batches per actor keep it busy while the driver writes the previous one
    max_in_flight = 2 * len(actors)
    bar = tqdm(total=len(todo), desc=f"{step.name} (ray)", unit="rec", disable=not progress, leave=False)
    next_batch = 0
    in_flight: dict[asyncio.Future, int] = {}
    try:
        with Appender(step_file(run_dir, step.name, shard)) as out:
            while next_batch < len(batches) or in_flight:
                while next_batch < len(batches) and len(in_flight) < max_in_flight:
                    actor = actors[next_batch % len(actors)]
                    fut = asyncio.ensure_future(actor.process_batch.remote(batches[next_batch]))
                    in_flight[fut] = next_batch
                    next_batch += 1
                done, _ = await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                for fut in done:
                    in_flight.pop(fut)
                    envs = [Envelope.model_validate(raw) for raw in fut.result()]
                    await out.append_async(*envs)
                    for env in envs:
                        _count(stats, env)
                    bar.update(len(envs))
    finally:
        for fut in in_flight:
            fut.cancel()
        bar.close()
        await asyncio.gather(*(a.close.remote() for a in actors), return_exceptions=True)
        for a in actors:
            ray.kill(a)
    stats.elapsed_s = time.monotonic() - t0
    return stats


async def run_step_here_or_on_ray(
    step: Step,
    inputs: Iterable[Record],
    run_dir: str | Path,
    *,
    context: Callable[[], Awaitable[StepContext]],
    context_factory: ContextFactory,
    ray_workers: int,
    concurrency: int,
    concurrency_per_worker: int,
    shard: Shard | None,
    progress: bool,
) -> RunStats:
    """One step in this process (`context()`: the run's own context, made once) or, with
    `ray_workers` > 0, on that many Ray actors (each builds its context from `context_factory`).
    Both pipelines' runs dispatch their steps through here."""
    if ray_workers > 0:
        return await run_step_ray(
            step,
            inputs,
            run_dir,
            context_factory=context_factory,
            workers=ray_workers,
            concurrency_per_worker=concurrency_per_worker,
            shard=shard,
            progress=progress,
        )
    return await run_step(
        step, inputs, run_dir, ctx=await context(), concurrency=concurrency, shard=shard, progress=progress
    )
