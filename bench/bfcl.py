"""BFCL multi-turn hot paths: our sandboxed execution and scoring vs BFCL's own, in-process.

Two paths, each run side by side on the same ground-truth episodes (N entries per category):

- environment: every ground-truth call of an episode executed by our tool wrappers in one
  sandbox session (what `astra_tool_agent` does per call) vs BFCL's executor
  (`execute_multi_turn_func_call`, `eval` of the call strings in this process, fresh instances
  per run). Per episode: session open + calls + close vs instance creation + calls.
- scoring: `bfcl_score.score_episode` (BFCL's checker in a fresh sandbox session) vs
  `multi_turn_checker` called in this process. The in-process variant is what one must never
  do with model output (it `eval`s it); here it only sees BFCL's own ground truth.

Each episode runs `--concurrency` at a time on a pool of `--workers` sandbox workers; the
in-process baselines run sequentially (BFCL's executor is synchronous). Prints per-episode
latency (median, p95), throughput and the ratio ours/BFCL's.

    .venv/bin/python bench/bfcl.py [--per-category 10] [--workers 2] [--concurrency 8] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from astra_verl.eval import bfcl_replay  # noqa: E402
from astra_verl.eval.bfcl_hook import BfclMultiTurnHook  # noqa: E402
from astra_verl.eval.bfcl_run import prepare  # noqa: E402
from astra_verl.eval.bfcl_score import REQUIRED_PACKAGES, call_string, score_episode  # noqa: E402
from astra_verl.rollout.call_log import CallRecord, CallStatus, EpisodeLog  # noqa: E402
from astra_verl.rollout.toolset import ToolCatalog  # noqa: E402
from astra_verl.sandbox import SandboxConfig, SandboxPool  # noqa: E402
from env_registry.rows import RowInfo  # noqa: E402


def summary(name: str, seconds: list[float], wall: float) -> str:
    seconds = sorted(seconds)
    p95 = seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))]
    return (
        f"{name:<34} median {1e3 * statistics.median(seconds):7.1f} ms  p95 {1e3 * p95:7.1f} ms  "
        f"{len(seconds) / wall:7.1f} episodes/s"
    )


def ground_truth_log(env_id: str, turns) -> EpisodeLog:
    """The episode log a perfect model leaves: one step of calls per turn, then a step without."""
    log = EpisodeLog(env_id=env_id, hook="bfcl_multi_turn")
    starts, step = [], 1
    for calls in turns:
        starts.append(step)
        log.calls += [
            CallRecord(turn=step, index=i, tool=n, arguments=a, status=CallStatus.OK) for i, (n, a) in enumerate(calls)
        ]
        step += 2 if calls else 1
    log.hook_state = {
        "turn_starts": starts,
        "turns_delivered": len(turns),
        "steps_per_turn": [1] * len(turns),
        "call_style": "prompt",
    }
    return log


def bfcl_execute(entry, turns) -> None:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    model = f"bench_{time.perf_counter_ns()}"  # fresh instances: BFCL caches them per model name and entry
    for calls in turns:
        execute_multi_turn_func_call(
            [call_string(n, a) for n, a in calls],
            entry.initial_config,
            entry.involved_classes,
            model,
            entry.id,
            long_context=entry.long_context,
        )


def bfcl_check(entry, turns) -> bool:
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker

    decoded = [[[call_string(n, a) for n, a in calls]] if calls else [] for calls in turns]
    test_entry = {"id": entry.id, "initial_config": entry.initial_config, "involved_classes": entry.involved_classes}
    model = f"bench_{time.perf_counter_ns()}"
    return multi_turn_checker(decoded, entry.ground_truth, test_entry, f"multi_turn_{entry.category}", model)["valid"]


async def ours(data, plans, config: SandboxConfig, concurrency: int) -> tuple[dict, dict]:
    catalog = ToolCatalog()
    gate = asyncio.Semaphore(concurrency)
    env_s: list[float] = []
    score_s: list[float] = []
    async with SandboxPool(config) as pool:
        await pool.start()

        async def environment(i: int) -> None:
            async with gate:
                t0 = time.perf_counter()
                extra_info = data.rows[i]["extra_info"]
                hook = BfclMultiTurnHook(extra_info["interaction_kwargs"])  # its pool: the held-back tools
                toolset = catalog.toolset(RowInfo.from_extra_info(extra_info), hook.tool_pool())
                session = await pool.open_session(toolset.program)
                for calls in plans[i]:
                    for name, args in calls:
                        tool = toolset.tools[name]
                        await pool.call(session, tool.module, tool.function, args)
                await pool.close_session(session)
                env_s.append(time.perf_counter() - t0)

        async def scoring(i: int) -> None:
            async with gate:
                t0 = time.perf_counter()
                verdict = await score_episode(pool, data.targets[i], ground_truth_log(data.targets[i].env_id, plans[i]))
                assert verdict.valid, (data.entries[i].id, verdict)
                score_s.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        await asyncio.gather(*(environment(i) for i in range(len(plans))))
        env_wall = time.perf_counter() - t0
        t0 = time.perf_counter()
        await asyncio.gather(*(scoring(i) for i in range(len(plans))))
        score_wall = time.perf_counter() - t0
    return {"s": env_s, "wall": env_wall}, {"s": score_s, "wall": score_wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-category", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        data = prepare(Path(tmp) / "store", limit=args.per_category)
        plans = [bfcl_replay.turn_calls(e) for e in data.entries]
        calls = sum(len(t) for p in plans for t in p)
        config = SandboxConfig(
            workers=args.workers, packages=list(REQUIRED_PACKAGES), call_timeout_s=30.0, max_output_chars=200_000
        )
        print(f"{len(plans)} episodes, {calls} ground-truth calls; sandbox: {args.workers} workers")
        for r in range(args.repeat):
            env, score = asyncio.run(ours(data, plans, config, args.concurrency))
            base_env, base_score = [], []
            t0 = time.perf_counter()
            for entry, turns in zip(data.entries, plans, strict=True):
                t1 = time.perf_counter()
                bfcl_execute(entry, turns)
                base_env.append(time.perf_counter() - t1)
            base_env_wall = time.perf_counter() - t0
            t0 = time.perf_counter()
            for entry, turns in zip(data.entries, plans, strict=True):
                t1 = time.perf_counter()
                assert bfcl_check(entry, turns), entry.id
                base_score.append(time.perf_counter() - t1)
            base_score_wall = time.perf_counter() - t0
            print(f"-- run {r + 1}")
            print(summary("environment: ours (sandbox)", env["s"], env["wall"]))
            print(summary("environment: BFCL executor (in-proc)", base_env, base_env_wall))
            print(f"   throughput ratio ours/BFCL: {(len(plans) / env['wall']) / (len(plans) / base_env_wall):.2f}x")
            print(summary("scoring: ours (checker in sandbox)", score["s"], score["wall"]))
            print(summary("scoring: BFCL checker (in-proc)", base_score, base_score_wall))
            print(f"   throughput ratio ours/BFCL: {base_score_wall / score['wall']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
