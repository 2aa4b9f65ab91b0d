"""Run one step over its input records: bounded async concurrency, resumable, shardable.

    class Judge(Step[Task, Scored]):
        name = "traj.judge"
        input_type, output_type = Task, Scored
        async def process(self, record, ctx):
            reply = await ctx.llm.complete_json(..., step=self.name, schema=Verdict)
            if reply.value.score < 0.5:
                raise Reject("low_score", f"{reply.value.score:.2f}")
            return Scored(key=record.key, ...)

    stats = await run_step(Judge(), inputs, run_dir, ctx=ctx, concurrency=64, shard=Shard.parse("0/4"))
    scored = read_outputs(run_dir, "traj.judge", Scored)

What `run_step` guarantees:
- Inputs whose key already has a final envelope (ok / rejected) in the step's files are
  skipped; `error` envelopes are retried. Inputs outside `shard` are skipped. A key seen twice
  in one input stream is processed once.
- At most `concurrency` records are in flight; each result is fsync'ed before it counts.
  Kill the process at any moment and a rerun neither loses nor duplicates a record.
- `process` raising `Reject` or `LLMOutputError` -> `rejected` with its reason;
  `LLMUnavailable` -> `error` (`llm_unavailable`); any other exception -> `error`
  (`exception:<Type>`, traceback tail in `detail`). The run itself never dies of a record.
- Each envelope's `meta` carries the record's elapsed time and LLM usage.
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import ValidationError
from tqdm.auto import tqdm

from astra_foundation.llm.client import LLMClient, usage_scope
from astra_foundation.llm.types import LLMOutputError, LLMUnavailable
from data_synth.pipeline.records import Envelope, Record, Reject
from data_synth.pipeline.shard import Shard
from data_synth.pipeline.store import Appender, RunDirError, read_envelopes, step_file

log = logging.getLogger(__name__)

I = TypeVar("I", bound=Record)  # noqa: E741
O = TypeVar("O", bound=Record)  # noqa: E741
R = TypeVar("R", bound=Record)
T = TypeVar("T")


@dataclass
class StepContext:
    """What every step may use besides its input: the synthesis LLM client and the run directory.
    Each pipeline's steps get a typed subclass that names the rest (`data_synth.env.context.EnvContext`:
    the sandbox and the store; `data_synth.traj.steps.TrajContext`: the agent and judge clients, the
    servers, the personas), so a step's dependencies are fields a reader and a linter can follow.
    Built per process (a Ray worker builds its own through a `ContextFactory`)."""

    llm: LLMClient | None = None
    run_dir: Path | None = None

    async def aclose(self) -> None:
        if self.llm is not None:
            await self.llm.aclose()


ContextFactory = Callable[[], Awaitable[StepContext]]


class Step(ABC, Generic[I, O]):
    """One job. Subclasses set `name`, `input_type`, `output_type` and implement `process`.
    A step object holds configuration only (it is pickled to Ray workers)."""

    name: ClassVar[str]
    input_type: ClassVar[type[Record]]
    output_type: ClassVar[type[Record]]

    @abstractmethod
    async def process(self, record: I, ctx: StepContext) -> O | list[O]:
        """Return the output record(s), or raise `Reject`."""


@dataclass
class RunStats:
    """What one invocation of a step did (the funnel counts what is on disk overall)."""

    step: str
    seen: int = 0  # inputs in this shard
    skipped_done: int = 0
    duplicates: int = 0
    ok: int = 0
    rejected: int = 0
    error: int = 0
    elapsed_s: float = 0.0
    first_error: str | None = None  # "record <key>: <reason>: <detail>" of the first error envelope

    @property
    def processed(self) -> int:
        return self.ok + self.rejected + self.error

    def line(self) -> str:
        """One line of counts; with errors, a second one with the first error's detail (the
        rest are in the step's file), so a failing run says why on the console."""
        text = (
            f"{self.step}: {self.processed} processed ({self.ok} ok, {self.rejected} rejected, {self.error} error), "
            f"{self.skipped_done} already done, {self.elapsed_s:.1f} s"
        )
        if self.first_error:
            text += f"\n  first error: {self.first_error}"
        return text


async def gather_or_cancel(*aws: Awaitable[T]) -> list[T]:
    """Results of all, in order. At the first failure the others are cancelled and it is raised:
    asyncio.gather would leave them running (and spending LLM calls) for a record already lost."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for t in tasks:
            t.cancel()


def _short_traceback(e: BaseException, limit: int = 6) -> str:
    lines = traceback.format_exception(type(e), e, e.__traceback__)
    return "".join(lines[-limit:])[-2000:]


async def process_one(step: Step, record: Record, ctx: StepContext) -> Envelope:
    """Run `step` on one record and wrap the outcome; never raises (but for cancellation)."""
    t0 = time.monotonic()
    status, reason, detail, out = "ok", None, None, []
    with usage_scope() as usage:
        try:
            result = await step.process(record, ctx)
            results = result if isinstance(result, list) else [result]
            for r in results:
                if not isinstance(r, step.output_type):
                    raise TypeError(f"{step.name} returned a {type(r).__name__}, not a {step.output_type.__name__}")
            out = [r.model_dump(mode="json") for r in results]
        except Reject as e:
            status, reason, detail = "rejected", e.reason, e.detail
        except LLMOutputError as e:
            status, reason, detail = "rejected", e.reason, e.detail
        except LLMUnavailable as e:
            status, reason, detail = "error", "llm_unavailable", str(e)
        except Exception as e:  # a bug or an unexpected input: record it, keep the run alive
            status, reason, detail = "error", f"exception:{type(e).__name__}", _short_traceback(e)
            log.warning("%s: record %s failed: %s: %s", step.name, record.key, type(e).__name__, e)
    meta: dict[str, Any] = {"elapsed_s": round(time.monotonic() - t0, 4)}
    if usage.requests or usage.completions:
        meta["usage"] = usage.model_dump()
    return Envelope(
        step=step.name,
        key=record.key,
        status=status,
        reason=reason,
        detail=detail,
        record_version=step.output_type.VERSION,
        out=out,
        meta=meta,
    )


def _count(stats: RunStats, env: Envelope) -> None:
    setattr(stats, env.status, getattr(stats, env.status) + 1)
    if env.status == "error" and stats.first_error is None:
        detail = " ".join((env.detail or "").split())  # a traceback tail on one line
        stats.first_error = f"record {env.key}: {env.reason}: {detail[-400:]}"


def _finished(run_dir: str | Path, step: Step) -> dict[str, Envelope]:
    done = {k: e for k, e in read_envelopes(run_dir, step.name).items() if e.final}
    for key, env in done.items():
        if env.status == "ok" and env.record_version != step.output_type.VERSION:
            raise RunDirError(
                f"{step.name}: record {key} has version {env.record_version}, this code writes version "
                f"{step.output_type.VERSION}; continue in a fresh run directory"
            )
    return done


def _unique(inputs: Iterable[Record], shard: Shard, stats: RunStats) -> Iterator[Record]:
    seen: set[str] = set()
    for record in inputs:
        if not shard.contains(record.key):
            continue
        stats.seen += 1
        if record.key in seen:
            stats.duplicates += 1
            continue
        seen.add(record.key)
        yield record


def pending(
    step: Step, inputs: Iterable[Record], run_dir: str | Path, shard: Shard, stats: RunStats
) -> Iterator[Record]:
    """The inputs one step must process (see the module doc), counting the rest in `stats`."""
    done = _finished(run_dir, step)
    for record in _unique(inputs, shard, stats):
        if record.key in done:
            stats.skipped_done += 1
            continue
        yield record


async def run_chain(
    steps: list[Step],
    inputs: Iterable[Record],
    run_dir: str | Path,
    *,
    ctx: StepContext,
    concurrency: int = 64,
    shard: Shard | None = None,
    progress: bool = True,
) -> list[RunStats]:
    """Run `steps` back to back per record: a record moves on to the next step as soon as it
    is done with one, so while some records wait on the LLM in one step others use the
    sandbox in the next, and no step waits for the slowest record of the one before. Each
    step writes its own file exactly as `run_step` would, with the same resume rules: a
    record resumes at the first step without a final envelope for it. `concurrency` bounds
    input records in flight (a fan-out step's outputs travel within their input's slot).

    Over 60 lines because `advance` and `root` are closures over the shared in-flight state
    (stats, resume index, appenders, slots, progress bar) that the cleanup below must also
    reach; as separate functions they would pass all six around."""
    if not steps:
        return []
    for a, b in zip(steps, steps[1:], strict=False):
        if not issubclass(a.output_type, b.input_type):
            raise TypeError(f"{a.name} writes {a.output_type.__name__} but {b.name} reads {b.input_type.__name__}")
    shard = shard or Shard(0, 1)
    stats = [RunStats(step=s.name) for s in steps]
    t0 = time.monotonic()
    done = [_finished(run_dir, s) for s in steps]
    roots = list(_unique(inputs, shard, stats[0]))
    stats[0].seen = 0  # counted again below, as records arrive at each step
    desc = " > ".join(s.name for s in steps)
    bar = tqdm(total=len(roots), desc=desc, unit="rec", disable=not progress, leave=False)
    slots = asyncio.Semaphore(concurrency)

    async def advance(record: Record, i: int, outs: list[Appender]) -> None:
        stats[i].seen += 1
        env = done[i].get(record.key)
        if env is None:
            env = await process_one(steps[i], record, ctx)
            await outs[i].append_async(env)
            _count(stats[i], env)
        else:
            stats[i].skipped_done += 1
        if env.status != "ok" or i + 1 == len(steps):
            return
        next_type = steps[i + 1].input_type
        await asyncio.gather(*(advance(next_type.model_validate(o), i + 1, outs) for o in env.out))

    async def root(record: Record, outs: list[Appender]) -> None:
        try:
            await advance(record, 0, outs)
            bar.update(1)
        finally:
            slots.release()

    tasks: set[asyncio.Task] = set()
    outs = [Appender(step_file(run_dir, s.name, shard)) for s in steps]
    try:
        for record in roots:
            await slots.acquire()
            task = asyncio.create_task(root(record, outs))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        for out in outs:
            out.close()
        bar.close()
    elapsed = time.monotonic() - t0
    for st in stats:
        st.elapsed_s = elapsed
    return stats


async def run_step(
    step: Step,
    inputs: Iterable[Record],
    run_dir: str | Path,
    *,
    ctx: StepContext,
    concurrency: int = 64,
    shard: Shard | None = None,
    progress: bool = True,
) -> RunStats:
    """One step over its inputs (see the module doc)."""
    (stats,) = await run_chain(
        [step], inputs, run_dir, ctx=ctx, concurrency=concurrency, shard=shard, progress=progress
    )
    return stats


def read_outputs(run_dir: str | Path, step: str, record_type: type[R]) -> list[R]:
    """The output records of a step's `ok` envelopes, across shards, sorted by key."""
    records: list[R] = []
    for key, env in sorted(read_envelopes(run_dir, step).items()):
        if env.status != "ok":
            continue
        if env.record_version != record_type.VERSION:
            raise RunDirError(
                f"{step}: record {key} has version {env.record_version}, {record_type.__name__} is version "
                f"{record_type.VERSION}; rerun the step into a fresh run directory"
            )
        for raw in env.out:
            try:
                records.append(record_type.model_validate(raw))
            except ValidationError as e:
                raise RunDirError(f"{step}: record {key} is not a valid {record_type.__name__}: {e}") from None
    records.sort(key=lambda r: r.key)
    return records
