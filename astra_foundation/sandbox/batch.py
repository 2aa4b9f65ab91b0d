"""Synchronous batch helpers: run golden calls of many programs (env validation, synthesis replay).

Each job runs in one fresh session (its calls in order, sharing that session's state); jobs run
concurrently on one pool started for the batch. For use from synchronous code only: inside a
running event loop use `SandboxPool` directly.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .config import SandboxConfig
from .pool import SandboxPool
from .protocol import CallResult, Program

Call = tuple[str, str, dict[str, Any]]  # (module, function, kwargs)


@dataclass(frozen=True)
class BatchJob:
    program: Program
    calls: Sequence[Call]


def run_programs(
    jobs: Iterable[BatchJob | tuple[Program, Sequence[Call]]],
    config: SandboxConfig | None = None,
    *,
    concurrency: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[list[CallResult]]:
    """Results per job, in job order. `progress(done, total)` is called after each job (e.g.
    `bar = tqdm(total=n); progress=lambda d, t: bar.update(1)`). `concurrency` bounds jobs in
    flight (default: twice the CPU count)."""
    jobs = [j if isinstance(j, BatchJob) else BatchJob(*j) for j in jobs]
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("run_programs/run_calls block; inside a running event loop use SandboxPool's async API")
    config = config or SandboxConfig()
    limit = concurrency or max(2, 2 * (os.cpu_count() or 1))

    async def main() -> list[list[CallResult]]:
        done = 0
        async with SandboxPool(config) as pool:
            gate = asyncio.Semaphore(limit)

            async def one(job: BatchJob) -> list[CallResult]:
                nonlocal done
                async with gate:
                    session = await pool.open_session(job.program)
                    try:
                        results = [await pool.call(session, m, f, kw) for m, f, kw in job.calls]
                    finally:
                        await pool.close_session(session)
                done += 1
                if progress is not None:
                    progress(done, len(jobs))
                return results

            return list(await asyncio.gather(*(one(j) for j in jobs)))

    return asyncio.run(main())


def run_calls(program: Program, calls: Sequence[Call], config: SandboxConfig | None = None) -> list[CallResult]:
    """Run `calls` in order in one fresh session of `program`."""
    return run_programs([BatchJob(program, calls)], config)[0]
