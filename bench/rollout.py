"""Per-episode overhead of `astra_tool_agent` vs verl's stock `ToolAgentLoop`, generation excluded.

Both loops replay the same scripted episodes from the same scripted server (tokens of fixed
texts, no model): procedural environments solved by their golden calls, one call per turn,
then a final answer. Ours resolves the row's tools from a store, checks every call against
its JSON Schema, runs it in the sandbox (a fresh session per episode), matches its output
against the sub-questions and writes the call log. Stock calls an equivalent in-process
`FunctionTool` (the same tool source, executed in this process: trusted generator output,
bench only) and keeps no log.

Overhead = wall time of `loop.run` minus the time spent inside the server's `generate`
(`--gen-ms` adds simulated generation time per turn, an asyncio sleep, also subtracted: with
it, ours opens the episode's sandbox session behind the first turn's generation, as in real
training; in the concurrent mode generation overlaps other episodes' work and is not
subtracted, so those rows are wall time per episode). Printed per mode: ms/episode for both loops and the ratio (median of `--reps`
interleaved repetitions); for ours also the sandbox's time, split into session opens (started
in the background at episode start) and calls + closes (on the episode's path). The machine's
load average is printed: on a shared machine, read the ratios, not the absolute numbers.
Modes: sequential (one episode at a time: latency) and concurrent (`--concurrency` in flight:
what a rollout worker does).

    .venv/bin/python bench/rollout.py [--episodes 60] [--concurrency 16] [--envs 8] [--gen-ms 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchkit import Report, machine_line


class TimedSandbox:
    """Wraps the loops' pool; accumulates the wall time spent in it: session opens (which run in
    the background of the first turn) apart from calls and closes (on the episode's path)."""

    def __init__(self, pool):
        self.pool = pool
        self.open_s = 0.0
        self.calls_s = 0.0

    async def open_session(self, program):
        t0 = time.perf_counter()
        try:
            return await self.pool.open_session(program)
        finally:
            self.open_s += time.perf_counter() - t0

    async def _timed(self, coro):
        t0 = time.perf_counter()
        try:
            return await coro
        finally:
            self.calls_s += time.perf_counter() - t0

    def call(self, session, module, function, kwargs):
        return self._timed(self.pool.call(session, module, function, kwargs))

    def close_session(self, session):
        return self._timed(self.pool.close_session(session))


def golden_script(spec) -> list[str]:
    turns = []
    for q in spec.sub_questions:
        if q.needs_tool:
            golden = next(g for g in spec.tool(q.tool).golden_calls if g.expected == q.answer)
            turns.append("<tool_call>\n" + json.dumps({"name": q.tool, "arguments": golden.args}) + "\n</tool_call>")
    turns.append(f"The answer is {spec.final_answer}.")
    return turns


def stock_tools(spec):
    """verl FunctionTools running the environment's tool code in this process."""
    from verl.tools.function_tool import FunctionTool
    from verl.tools.schemas import OpenAIFunctionToolSchema

    tools = []
    for t in spec.tools:
        namespace: dict = {}
        exec(compile(t.source, f"<{t.name}>", "exec"), namespace)  # noqa: S102 - trusted generator output, bench only
        fn = namespace[t.name]

        def call(_fn=fn, **kwargs):
            out = _fn(**kwargs)
            return json.dumps(out) if isinstance(out, dict | list) else str(out)

        schema = OpenAIFunctionToolSchema.model_validate(t.openai_schema())
        tools.append(FunctionTool(name=t.name, fn=call, tool_schema=schema, is_async=False))
    return tools


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=60, help="episodes per loop and mode")
    ap.add_argument("--concurrency", type=int, default=16, help="episodes in flight in the concurrent mode")
    ap.add_argument("--envs", type=int, default=8, help="procedural environments to cycle through")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gen-ms", type=float, default=0.0, help="simulated generation time per assistant turn")
    ap.add_argument("--reps", type=int, default=5, help="interleaved repetitions per mode (median reported)")
    ap.add_argument("--quick", action="store_true", help="fewer episodes and repetitions (make bench)")
    ap.add_argument("--json", metavar="PATH", help="write the summary rows as JSON")
    args = ap.parse_args(argv)
    if args.quick:
        args.episodes, args.reps = 32, 3
    print(machine_line())
    report = Report("bench/rollout.py")

    from transformers import AutoTokenizer

    from astra_foundation.sandbox import SandboxPool
    from astra_verl.rollout.config import sandbox_settings
    from astra_verl.rollout.context import RolloutContext
    from astra_verl.rollout.testing import ScriptedServer, compose_trainer_config, make_loop, run
    from astra_verl.tiny_model import build
    from env_registry.families.procedural import generate
    from env_registry.rows import RowInfo, ToolRef
    from env_registry.store import EnvStore

    tmp = Path(tempfile.mkdtemp(prefix="bench-rollout-"))
    model_dir = build(tmp / "tiny")
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    specs = [s for s in generate(args.envs * 3, seed=args.seed) if sum(q.needs_tool for q in s.sub_questions) >= 2]
    specs = specs[: args.envs]
    with EnvStore.open(tmp / "store", "a", durable=False) as st:
        st.add_many(specs)
    cfg = compose_trainer_config(
        str(model_dir),
        [
            "actor_rollout_ref.rollout.prompt_length=8192",
            "actor_rollout_ref.rollout.response_length=4096",
            "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=4",
            "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=2048",
        ],
    )
    scripts = {s.id: golden_script(s) for s in specs}
    rows = []
    for s in specs:
        info = RowInfo(env_id=s.id, store=str(tmp / "store"), tools=[ToolRef(s.id, t.name) for t in s.tools])
        rows.append(
            {
                "raw_prompt": [{"role": "user", "content": s.question}],
                "extra_info": {"index": 0, "astra": info.to_json()},
                "tools_kwargs": {},
                "_env": s,
            }
        )

    def script(prompt: str, k: int) -> str:
        for s in specs:
            if s.question in prompt:
                return scripts[s.id][min(k, len(scripts[s.id]) - 1)]
        raise KeyError("prompt of no known environment")

    # the loops share one instrumented pool through the context they are built with
    timed = {"pool": TimedSandbox(SandboxPool(sandbox_settings(cfg)))}
    context = RolloutContext(sandbox=timed["pool"])

    def episode_kwargs(i: int) -> dict:
        r = rows[i % len(rows)]
        return {k: v for k, v in r.items() if k != "_env"}

    async def run_many(make, n: int, concurrency: int) -> tuple[float, float]:
        server = ScriptedServer(tok, script, latency_s=args.gen_ms / 1e3)
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int):
            async with sem:
                loop = make(server, rows[i % len(rows)]["_env"])
                return await loop.run({"temperature": 1.0}, **episode_kwargs(i))

        t0 = time.perf_counter()
        outs = await asyncio.gather(*(one(i) for i in range(n)))
        wall = time.perf_counter() - t0
        assert all(len(o.response_ids) > 0 for o in outs)
        # sequential: simulated generation is on the episode's path, subtract it; concurrent: it
        # overlaps other episodes' work, so only the server's own time is subtracted
        return wall, server.seconds + (server.slept if concurrency == 1 else 0.0)

    def ours(server, _spec):
        return make_loop(cfg, server, tok, agent_name="astra_tool_agent", context=context)

    def stock(server, spec):
        return make_loop(cfg, server, tok, agent_name="tool_agent", tools=stock_tools(spec))

    # warm up: sandbox workers, caches, jinja templates
    run(run_many(ours, len(rows), 4))
    run(run_many(stock, len(rows), 4))

    # check the scripted episodes really solve their environments (ours only logs it)
    from astra_verl.calls.call_log import EpisodeLog

    check_server = ScriptedServer(tok, script)
    out = run(ours(check_server, None).run({}, **episode_kwargs(0)))
    log = EpisodeLog.from_extra_fields(out.extra_fields)
    calls_per_ep = len(log.calls)
    assert all(c.ok for c in log.calls) and {q for c in log.calls for q in c.solved}, "golden replay failed"

    print(
        f"{len(specs)} procedural environments, {calls_per_ep}+ tool calls per episode, {args.episodes} episodes/mode, "
        f"simulated generation {args.gen_ms:g} ms/turn, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )
    print(f"{'mode':<20}{'stock ms/ep':>12}{'ours ms/ep':>12}{'ratio':>8}{'sandbox open':>14}{'calls+close':>13}")
    for mode, conc in (("sequential", 1), (f"concurrent x{args.concurrency}", args.concurrency)):
        samples = {"stock": [], "ours": [], "open": [], "calls": []}
        for _ in range(args.reps):
            wall, gen = run(run_many(stock, args.episodes, conc))
            samples["stock"].append((wall - gen) / args.episodes * 1e3)
            timed["pool"].open_s = timed["pool"].calls_s = 0.0
            wall, gen = run(run_many(ours, args.episodes, conc))
            samples["ours"].append((wall - gen) / args.episodes * 1e3)
            samples["open"].append(timed["pool"].open_s / args.episodes * 1e3)
            samples["calls"].append(timed["pool"].calls_s / args.episodes * 1e3)
        st, ou, op, ca = (statistics.median(samples[k]) for k in ("stock", "ours", "open", "calls"))
        print(f"{mode:<20}{st:>12.2f}{ou:>12.2f}{ou / st:>7.2f}x{op:>14.2f}{ca:>13.2f}")
        report.add(what=f"agent-loop overhead per episode, {mode}, generation {args.gen_ms:g} ms/turn "
                   f"({calls_per_ep} calls: schema checks, sandbox, call log)",
                   competitor="verl `ToolAgentLoop` with in-process `FunctionTool`s (no isolation, no log)",
                   ours=f"{ou:.2f} ms", theirs=f"{st:.2f} ms", ratio=f"{ou / st:.2f}x",
                   target="<= 1.5x" if conc == 1 else "", met=ou / st <= 1.5 if conc == 1 else None)  # fmt: skip
    print(
        "(sandbox columns: wall time awaited per episode; concurrent episodes overlap, so they can exceed the loop's)"
    )
    run(timed["pool"].pool.aclose())
    print(machine_line())
    report.write(args.json)


if __name__ == "__main__":
    main()
