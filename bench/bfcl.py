"""BFCL multi-turn hot paths: our sandboxed execution and scoring vs BFCL's own, in-process.

Two paths, each run on the same ground-truth episodes (N entries per category), one episode at
a time, ours and BFCL's interleaved per round:

- environment: every ground-truth call of an episode executed by our tool wrappers in one
  sandbox session (what `astra_tool_agent` does per call) vs BFCL's executor
  (`execute_multi_turn_func_call`, `eval` of the call strings in this process, fresh instances
  per run). Ours = session open + calls + close; BFCL's = instance creation + calls. The
  episode's toolset (tool schemas checked with jsonschema, in the trainer process, no sandbox)
  is timed apart: it is not sandbox time.
- scoring: `bfcl_score.score_episode` (BFCL's checker in a fresh sandbox session) vs
  `multi_turn_checker` called in this process. The in-process variant is what one must never
  do with model output (it `eval`s it); here it only sees BFCL's own ground truth.

Every entry's program is new to the workers (cold: the first rollout of an entry compiles its
wrappers; the other rollouts of a GRPO group reuse them). The workers preload BFCL's checker
and API class modules (`astra.sandbox.preload`, as the `astra_bfcl_eval` recipe sets).
Printed: per-episode median and p90 of each, the sandbox's overhead per episode (ours minus
BFCL's, medians), and a concurrent run's throughput. Target: overhead <= 20 ms per episode and
per scoring.

    .venv/bin/python bench/bfcl.py [--per-category 10] [--workers 2] [--concurrency 8] [--rounds 2]
    .venv/bin/python bench/bfcl.py --quick        # what `make bench` runs
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from benchkit import Report, machine_line, median, ms, percentile, verdict

from astra_foundation.sandbox import SandboxConfig, SandboxPool
from astra_verl.benchmarks.bfcl_hook import BfclMultiTurnHook
from astra_verl.benchmarks.bfcl_score import PRELOAD_MODULES, REQUIRED_PACKAGES, call_string, score_episode
from astra_verl.calls.call_log import CallRecord, EpisodeLog
from astra_verl.eval import bfcl_replay
from astra_verl.eval.bfcl_run import prepare
from astra_verl.rollout.toolset import ToolCatalog
from env_registry.call_gate import CallStatus
from env_registry.families.bfcl_package import bfcl_module
from env_registry.rows import RowInfo

TARGET_S = 0.020


def ground_truth_log(env_id: str, turns) -> EpisodeLog:
    """The episode log a perfect model leaves: one step of calls per turn, then a step without."""
    log = EpisodeLog(env_id=env_id, hook="bfcl_multi_turn", user_turns=len(turns) - 1)  # after the prompt's
    starts, step = [], 1
    for calls in turns:
        starts.append(step)
        log.calls += [
            CallRecord(turn=step, index=i, tool=n, arguments=a, status=CallStatus.OK) for i, (n, a) in enumerate(calls)
        ]
        step += 2 if calls else 1
    log.hook_state = {
        "turn_starts": starts,
        "steps_per_turn": [1] * len(turns),
        "call_style": "prompt",
    }
    return log


def bfcl_execute(entry, turns) -> None:
    execute_multi_turn_func_call = bfcl_module(
        "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"
    ).execute_multi_turn_func_call
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
    multi_turn_checker = bfcl_module("bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker").multi_turn_checker
    decoded = [[[call_string(n, a) for n, a in calls]] if calls else [] for calls in turns]
    test_entry = {"id": entry.id, "initial_config": entry.initial_config, "involved_classes": entry.involved_classes}
    model = f"bench_{time.perf_counter_ns()}"
    return multi_turn_checker(decoded, entry.ground_truth, test_entry, f"multi_turn_{entry.category}", model)["valid"]


class Ours:
    """Our path for one entry: its toolset (trainer process), then a sandbox session."""

    def __init__(self, data, plans, pool: SandboxPool):
        self.data, self.plans, self.pool = data, plans, pool

    async def environment(self, i: int, catalog: ToolCatalog) -> tuple[float, float]:
        """(toolset seconds, sandbox seconds) of episode i."""
        t0 = time.perf_counter()
        extra_info = self.data.rows[i]["extra_info"]
        hook = BfclMultiTurnHook(extra_info["interaction_kwargs"])  # its pool: the held-back tools
        toolset = catalog.toolset(RowInfo.from_extra_info(extra_info), hook.tool_pool())
        t1 = time.perf_counter()
        session = await self.pool.open_session(toolset.program)
        for calls in self.plans[i]:
            for name, args in calls:
                tool = toolset.tools[name]
                r = await self.pool.call(session, tool.module, tool.function, args)
                if not r.ok:
                    raise RuntimeError(f"{self.data.entries[i].id}: {name} failed in the sandbox: {r.text}")
        await self.pool.close_session(session)
        return t1 - t0, time.perf_counter() - t1

    async def scoring(self, i: int) -> float:
        t0 = time.perf_counter()
        target = self.data.targets[i]
        verdict_ = await score_episode(self.pool, target, ground_truth_log(target.env_id, self.plans[i]))
        if not verdict_.valid:
            raise RuntimeError(f"{self.data.entries[i].id}: BFCL's checker rejected its own ground truth: {verdict_}")
        return time.perf_counter() - t0


async def measure(data, plans, config: SandboxConfig, rounds: int, concurrency: int) -> dict:
    out = {k: [] for k in ("toolset", "env", "score", "bfcl_env", "bfcl_score")}
    async with SandboxPool(config) as pool:
        await pool.start()
        ours = Ours(data, plans, pool)
        await ours.scoring(0)  # warm-up: the pool's first sessions, this process's lazy imports
        bfcl_check(data.entries[0], plans[0])
        await asyncio.sleep(0.3)  # the workers fork their spares while idle
        for _ in range(rounds):
            catalog = ToolCatalog()  # cold: no toolset or schema cached from an earlier round
            for i in range(len(plans)):
                toolset_s, env_s = await ours.environment(i, catalog)
                out["toolset"].append(toolset_s)
                out["env"].append(env_s)
                t0 = time.perf_counter()
                bfcl_execute(data.entries[i], plans[i])
                out["bfcl_env"].append(time.perf_counter() - t0)
                out["score"].append(await ours.scoring(i))
                t0 = time.perf_counter()
                if not bfcl_check(data.entries[i], plans[i]):
                    raise RuntimeError(f"{data.entries[i].id}: BFCL's checker rejected its own ground truth")
                out["bfcl_score"].append(time.perf_counter() - t0)
        gate = asyncio.Semaphore(concurrency)
        catalog = ToolCatalog()

        async def episode(i):
            async with gate:
                await ours.environment(i, catalog)
                await ours.scoring(i)

        t0 = time.perf_counter()
        await asyncio.gather(*(episode(i) for i in range(len(plans))))
        out["concurrent_s"] = (time.perf_counter() - t0) / len(plans)
    return out


def line(name: str, xs: list[float]) -> str:
    return f"  {name:<48} median {ms(median(xs)):>9}  p90 {ms(percentile(xs, 0.9)):>9}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-category", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-preload", action="store_true", help="sessions import BFCL's modules themselves")
    parser.add_argument("--quick", action="store_true", help="fewer entries (make bench)")
    parser.add_argument("--json", metavar="PATH", help="write the summary rows as JSON")
    args = parser.parse_args()
    if args.quick:
        args.per_category, args.rounds = 5, 2

    with tempfile.TemporaryDirectory() as tmp:
        data = prepare(Path(tmp) / "store", limit=args.per_category)
        plans = [bfcl_replay.turn_calls(e) for e in data.entries]
        calls = sum(len(t) for p in plans for t in p)
        config = SandboxConfig(
            workers=args.workers,
            packages=list(REQUIRED_PACKAGES),
            preload=[] if args.no_preload else list(PRELOAD_MODULES),
            call_timeout_s=30.0,
            max_output_chars=200_000,
        )
        print(machine_line())
        print(
            f"{len(plans)} entries ({args.per_category} per category), {calls} ground-truth calls; sandbox: "
            f"{args.workers} workers, preload {'off' if args.no_preload else 'on'}; {args.rounds} rounds, one episode at a time"
        )
        r = asyncio.run(measure(data, plans, config, args.rounds, args.concurrency))

    env_over = median(r["env"]) - median(r["bfcl_env"])
    score_over = median(r["score"]) - median(r["bfcl_score"])
    print("per episode")
    print(line("environment: ours, sandbox (open + calls + close)", r["env"]))
    print(line("environment: BFCL executor, in process", r["bfcl_env"]))
    print(f"    sandbox overhead per episode: {ms(env_over)} (target <= {ms(TARGET_S)})")
    print(line("  (ours, before: toolset with schema checks, no sandbox)", r["toolset"]))
    print(line("scoring: ours (BFCL's checker in a sandbox session)", r["score"]))
    print(line("scoring: BFCL's checker, in process", r["bfcl_score"]))
    print(f"    sandbox overhead per scoring: {ms(score_over)} (target <= {ms(TARGET_S)})")
    print(
        f"concurrent ({args.concurrency} in flight, environment + scoring): {ms(r['concurrent_s'])} of wall time per entry "
        f"(sequential BFCL in process: {ms(median(r['bfcl_env']) + median(r['bfcl_score']))})"
    )
    print(machine_line())

    report = Report("bench/bfcl.py")
    report.add(what="BFCL episode: sandbox overhead (open + calls + close, minus BFCL's time)",
               competitor="BFCL's executor in process (no isolation)", ours=ms(median(r["env"])),
               theirs=ms(median(r["bfcl_env"])), ratio=f"+{ms(env_over)} per episode",
               target=f"<= {ms(TARGET_S)} overhead", met=env_over <= TARGET_S)  # fmt: skip
    report.add(what="BFCL scoring: sandbox overhead", competitor="BFCL's checker in process (no isolation)",
               ours=ms(median(r["score"])), theirs=ms(median(r["bfcl_score"])), ratio=f"+{ms(score_over)} per scoring",
               target=f"<= {ms(TARGET_S)} overhead", met=score_over <= TARGET_S)  # fmt: skip
    report.notes.append(
        f"toolset build per BFCL episode (trainer process, jsonschema checks of every tool schema, cold): "
        f"{ms(median(r['toolset']))} median"
    )
    for row in report.rows:
        print(f"target {row.target}: {row.ratio} -> {verdict(row.met)}")
    report.write(args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
