"""Per-episode cost of running tool code: our SandboxPool against what a verl user would run instead.

An episode is what one rollout needs: a fresh tool state, k tool calls, and the state thrown
away (open + k calls + close). Every approach runs the same tool with the same arguments, in the
same run, interleaved round by round (so load from other work hits all of them alike), one
episode at a time:

  ours  SandboxPool (warm workers, spare confined session processes; bwrap when it works here,
        else the process backend: see the isolation line). Each episode gets a program of its
        own (a distinct source, so the worker compiles it: cold, as the first rollout of a prompt).
  (a)   a fresh interpreter per call: `python3 -c <tool source + the call>`, reading stdout. This
        is the code-sandbox-service pattern ASTRA's released scripts use. It has no state across
        calls and no isolation of its own here (a service adds a container on top), so it is the
        cheapest version of that pattern.
  (b)   one fresh confined process per episode: bubblewrap (the same namespaces and read-only
        binds as our workers) + `python3 -I -S` loading the tool, then the k calls as JSON lines
        over a pipe. What one would build for per-episode isolation without a warm pool.
  (c)   verl's in-process `FunctionTool` (verl.tools.function_tool): the tool source exec'd into
        a fresh namespace per episode (fresh state, as the others), calls through
        `FunctionTool.call` (asyncio.to_thread). No isolation at all: the price of isolation.

A session compiles its own program (the worker never holds one: docs/security.md), so a program
opened again costs its compile again; the last lines measure that: the tool's compile time here,
and the session open p50 when every episode opens one and the same program (the G rollouts of one
GRPO group).

Printed, for k = 1..8 calls: the latency per episode (median and p90; ours with `--gap-ms`
between episodes, standing in for the generation that separates an episode's tool calls from
the next one's, during which the workers prepare their spares), every ratio, and the CPU per
episode of every process involved (ours: this process, the workers, the sessions and spares;
(a), (b): the interpreters and bubblewrap). Then the session open's p50/p99 and a back-to-back
run with several episodes in flight (no gaps: bound by CPU). Targets (on 2 idle cores): open p50
<= 3 ms; latency with 4 calls >= 50x lower than (a) and >= 20x lower than (b).

    .venv/bin/python bench/sandbox.py            # about 1 minute
    .venv/bin/python bench/sandbox.py --quick    # what `make bench` runs, about 25 s
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import time

from benchkit import Report, machine_line, median, ms, percentile, verdict

from astra_foundation.sandbox import Module, Program, SandboxConfig, SandboxPool
from astra_foundation.sandbox.launch import bwrap_args, bwrap_probe, python_executable

# A typical synthesized ASTRA tool: hard-coded mock data, defensive validation, a dict result.
TOOL = """
import datetime

_FLIGHTS = {
    ("PEK", "SHA"): [{"flight": "CA1501", "dep": "08:00", "price": 1260.0}, {"flight": "MU5102", "dep": "13:30", "price": 980.0}],
    ("SHA", "CAN"): [{"flight": "CZ3524", "dep": "09:15", "price": 1130.0}],
    ("CAN", "PEK"): [{"flight": "CA1302", "dep": "18:40", "price": 1450.0}],
}

def search_flights(origin: str, destination: str, date: str, max_price: float = 1e9):
    if not isinstance(origin, str) or len(origin) != 3:
        raise ValueError("origin must be a 3-letter IATA code")
    datetime.date.fromisoformat(date)
    options = [f for f in _FLIGHTS.get((origin.upper(), destination.upper()), []) if f["price"] <= max_price]
    return {"date": date, "origin": origin, "destination": destination, "options": options, "count": len(options)}
"""
ARGS = {"origin": "PEK", "destination": "SHA", "date": "2025-06-01", "max_price": 1500}
EXPECT = "CA1501"

# (b): the per-episode server run inside bubblewrap; the tool's source arrives as argv[1]. At
# the end it reports its own CPU time: bubblewrap's pid-1 process does not pass its children's
# CPU on to ours, so this process's rusage would not count it.
EPISODE_SERVER = """
import json, resource, sys
ns = {}
exec(compile(sys.argv[1], "<tool>", "exec"), ns)
for line in sys.stdin:
    req = json.loads(line)
    out = ns[req["f"]](**req["a"])
    sys.stdout.write(json.dumps(out) + "\\n")
    sys.stdout.flush()
r = resource.getrusage(resource.RUSAGE_SELF)
sys.stdout.write(f"cpu {r.ru_utime + r.ru_stime}\\n")
"""
CONFINED_CPU = [0.0]  # CPU seconds the (b) servers reported (their interpreters, start-up included)


def tool_source(episode: int) -> str:
    """The tool, distinct per episode (a comment): every episode is a program the worker has not compiled."""
    return f"# episode {episode}\n{TOOL}"


# ---------------------------------------------------------------- (a) fresh interpreter per call
def fresh_interpreter_episode(python: str, episode: int, k: int) -> float:
    t0 = time.perf_counter()
    for _ in range(k):
        code = tool_source(episode) + f"\nimport json\nprint(json.dumps(search_flights(**{ARGS!r})))\n"
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
        if out.returncode != 0 or EXPECT not in out.stdout:
            raise RuntimeError(f"(a) call failed: {out.stderr[-300:]}")
    return time.perf_counter() - t0


# ---------------------------------------------------------------- (b) confined process per episode
def confined_process_episode(argv: list[str], episode: int, k: int) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*argv, tool_source(episode)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    request = json.dumps({"f": "search_flights", "a": ARGS}) + "\n"
    for _ in range(k):
        proc.stdin.write(request)
        proc.stdin.flush()
        line = proc.stdout.readline()
        if EXPECT not in line:
            proc.kill()
            raise RuntimeError(f"(b) call failed: {line!r}")
    proc.stdin.close()
    last = proc.stdout.readline()
    proc.wait(timeout=60)
    elapsed = time.perf_counter() - t0
    if not last.startswith("cpu "):
        raise RuntimeError(f"(b) server did not report its CPU: {last!r}")
    CONFINED_CPU[0] += float(last.split()[1])
    return elapsed


def confined_argv() -> list[str]:
    return bwrap_args(SandboxConfig()) + ["--", python_executable(), "-I", "-S", "-c", EPISODE_SERVER]


# ---------------------------------------------------------------- (c) verl FunctionTool, in process
async def function_tool_episode(episode: int, k: int) -> float:
    from verl.tools.function_tool import FunctionTool

    t0 = time.perf_counter()
    namespace: dict = {}
    exec(compile(tool_source(episode), "<tool>", "exec"), namespace)  # noqa: S102 - our own bench tool
    fn = namespace["search_flights"]
    tool = FunctionTool(name="search_flights", fn=lambda **kw: json.dumps(fn(**kw)), tool_schema=SCHEMA)
    for _ in range(k):
        if EXPECT not in await tool.call(ARGS):
            raise RuntimeError("(c) call failed")
    return time.perf_counter() - t0


def _schema():
    from verl.tools.schemas import OpenAIFunctionToolSchema

    return OpenAIFunctionToolSchema.model_validate(
        {
            "type": "function",
            "function": {
                "name": "search_flights",
                "description": "Search flights.",
                "parameters": {
                    "type": "object",
                    "properties": {k: {"type": "string"} for k in ("origin", "destination", "date")},
                    "required": ["origin", "destination", "date"],
                },
            },
        }
    )


SCHEMA = None


# ---------------------------------------------------------------- ours
async def pool_episode(pool: SandboxPool, episode: int, k: int) -> tuple[float, float]:
    """(episode seconds, open seconds)"""
    t0 = time.perf_counter()
    session = await pool.open_session(Program((Module("search_flights", tool_source(episode)),)))
    opened = time.perf_counter() - t0
    for _ in range(k):
        r = await pool.call(session, "search_flights", "search_flights", ARGS)
        if not r.ok or EXPECT not in r.output:
            raise RuntimeError(f"pool call failed: {r.text}")
    await pool.close_session(session)
    return time.perf_counter() - t0, opened


async def pool_concurrent(pool: SandboxPool, k: int, episodes: int, concurrency: int, first: int) -> float:
    gate = asyncio.Semaphore(concurrency)

    async def one(i):
        async with gate:
            await pool_episode(pool, first + i, k)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(episodes)))
    return (time.perf_counter() - t0) / episodes


def threads_concurrent(fn, episodes: int, concurrency: int) -> float:
    from concurrent.futures import ThreadPoolExecutor

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(fn, range(episodes)))
    return (time.perf_counter() - t0) / episodes


# ---------------------------------------------------------------- CPU accounting
def children_cpu() -> float:
    """CPU seconds of this process's waited-for children (and theirs): (a) and (b)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def process_tree_cpu(pid: int) -> float:
    """CPU seconds of a live process and the children it reaped: a sandbox worker and its sessions."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU seconds spent by this process, its waited children and the given live processes."""

    def __init__(self, pids=()):
        self.pids = [p for p in pids if p]
        self.start = self.now()

    def now(self) -> float:
        own = time.process_time() + children_cpu() + CONFINED_CPU[0]
        return own + sum(process_tree_cpu(p) for p in self.pids)

    def spent(self) -> float:
        return self.now() - self.start


# ---------------------------------------------------------------- the run
async def measure(args, ks: list[int], confined: list[str] | None) -> dict:
    python = python_executable()
    times: dict[tuple[str, int], list[float]] = {}
    cpu: dict[str, list[float]] = {}
    opens: list[float] = []
    episode = 0
    async with SandboxPool(SandboxConfig(workers=args.workers, backend=args.backend)) as pool:
        await pool.start()
        isolation = pool.isolation
        for _ in range(3):  # warm-up: imports, the first fork of each worker
            await pool_episode(pool, -1, 1)
            await function_tool_episode(-1, 1)
        workers = pool.worker_pids()
        for _ in range(args.rounds):
            for k in ks:
                meter = CpuMeter(workers)
                for _ in range(args.episodes):
                    episode += 1
                    # the model generates between two episodes' tool phases: the workers use
                    # that time to fork and confine their next spares
                    await asyncio.sleep(args.gap_ms / 1e3)
                    total, opened = await pool_episode(pool, episode, k)
                    times.setdefault(("ours", k), []).append(total)
                    opens.append(opened)
                await asyncio.sleep(0.05)  # the last sessions reaped, their CPU counted by their worker
                cpu.setdefault(f"ours{k}", []).append(meter.spent() / args.episodes)
                meter = CpuMeter()
                for _ in range(args.episodes):
                    episode += 1
                    times.setdefault(("c", k), []).append(await function_tool_episode(episode, k))
                cpu.setdefault(f"c{k}", []).append(meter.spent() / args.episodes)
                for key, run in (("a", fresh_interpreter_episode), ("b", confined_process_episode)):
                    if key == "b" and not confined:
                        continue
                    meter = CpuMeter()
                    for _ in range(args.baseline_episodes):
                        episode += 1
                        times.setdefault((key, k), []).append(run(python if key == "a" else confined, episode, k))
                    cpu.setdefault(f"{key}{k}", []).append(meter.spent() / args.baseline_episodes)
        same_program_opens = []
        for _ in range(args.episodes):  # one program for every episode: a GRPO group's rollouts
            await asyncio.sleep(args.gap_ms / 1e3)
            same_program_opens.append((await pool_episode(pool, -2, 1))[1])
        k = 4
        conc = {"ours": await pool_concurrent(pool, k, args.concurrency * 6, args.concurrency, 10**6)}
    conc["a"] = threads_concurrent(
        lambda i: fresh_interpreter_episode(python, 2 * 10**6 + i, k), 2 * args.concurrency, args.concurrency
    )
    if confined:
        conc["b"] = threads_concurrent(
            lambda i: confined_process_episode(confined, 3 * 10**6 + i, k), 2 * args.concurrency, args.concurrency
        )
    return {
        "times": times,
        "cpu": cpu,
        "opens": opens,
        "same_program_opens": same_program_opens,
        "isolation": isolation,
        "concurrent": conc,
    }


def compile_seconds(source: str, repeat: int = 200) -> float:
    """Median seconds to compile `source` in this process (what a session pays for its program)."""
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        compile(source, "<tool>", "exec", dont_inherit=True)
        runs.append(time.perf_counter() - t0)
    return median(runs)


def main() -> None:
    """Over 60 lines because it prints the report top to bottom, one table after another, in the
    order a reader reads it; each block needs the numbers the one before computed."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", default="1,2,4,8", help="calls per episode, k (default 1,2,4,8)")
    ap.add_argument("--episodes", type=int, default=40, help="episodes of ours and (c) per k and round (default 40)")
    ap.add_argument(
        "--baseline-episodes", type=int, default=4, help="episodes of (a) and (b) per k and round (default 4)"
    )
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--workers", type=int, default=2, help="sandbox workers (default 2)")
    ap.add_argument("--concurrency", type=int, default=4, help="episodes in flight in the concurrent run (default 4)")
    ap.add_argument("--gap-ms", type=float, default=20.0,
                    help="pause before each of our episodes, standing in for generation (default 20)")  # fmt: skip
    ap.add_argument("--backend", default="auto", choices=["auto", "bwrap", "process"], help="pool backend")
    ap.add_argument("--quick", action="store_true", help="fewer samples (make bench)")
    ap.add_argument("--json", metavar="PATH", help="write the summary rows as JSON")
    args = ap.parse_args()
    if args.quick:
        args.calls, args.episodes, args.baseline_episodes, args.rounds = "1,4,8", 25, 2, 3
    ks = [int(k) for k in args.calls.split(",")]
    global SCHEMA
    SCHEMA = _schema()
    ok, detail = bwrap_probe()
    confined = confined_argv() if ok else None

    print(machine_line())
    print("tool: search_flights (mock data, validation, dict result), a distinct program per episode")
    res = asyncio.run(measure(args, ks, confined))
    print(f"isolation (ours): {res['isolation']}")
    if not confined:
        print(f"(b) not measured: {detail}")
    t = res["times"]
    names = {
        "ours": "ours: SandboxPool",
        "a": "(a) fresh python3 per call",
        "b": "(b) bwrap + python3 per episode",
        "c": "(c) verl FunctionTool, in process",
    }
    print(
        f"\nlatency per episode (open + k calls + close), one at a time, ours {args.gap_ms:g} ms apart "
        "(generation); median [p90]"
    )
    print(f"{'':36}" + "".join(f"{'k=' + str(k):>22}" for k in ks))
    for key, name in names.items():
        if (key, ks[0]) in t:
            cells = [f"{ms(median(t[key, k]))} [{ms(percentile(t[key, k], 0.9))}]" for k in ks]
            print(f"  {name:34}" + "".join(f"{c:>22}" for c in cells))
    print("latency ratios (medians)")
    for key in ("a", "b"):
        if (key, ks[0]) in t:
            ratios = "  ".join(f"k={k} {median(t[key, k]) / median(t['ours', k]):.0f}x" for k in ks)
            print(f"  {names[key][:3]} / ours: {ratios}")
    ratios = "  ".join(f"k={k} {median(t['ours', k]) / median(t['c', k]):.1f}x" for k in ks)
    print(f"  ours / (c): {ratios}  (the price of isolation)")
    cpu = {key: median(v) for key, v in res["cpu"].items()}
    print("CPU per episode, every process involved (ours: this process + workers + sessions, spares included)")
    for key, name in names.items():
        if f"{key}{ks[0]}" in cpu:
            print(f"  {name:34}" + "".join(f"{ms(cpu[f'{key}{k}']):>22}" for k in ks))
    o50, o99 = median(res["opens"]), percentile(res["opens"], 0.99)
    print(f"session open (part of ours above): p50 {ms(o50)}, p99 {ms(o99)}")
    same = res["same_program_opens"]
    print(
        f"session open, one program for every episode (a GRPO group): p50 {ms(median(same))}, "
        f"p99 {ms(percentile(same, 0.99))}; compiling the tool ({len(TOOL):,} chars) here: "
        f"{compile_seconds(tool_source(0)) * 1e3:.3f} ms"
    )
    c = res["concurrent"]
    print(
        f"\nback to back, {args.concurrency} episodes in flight, k=4, wall time per episode: ours {ms(c['ours'])}, "
        f"(a) {ms(c['a'])} ({c['a'] / c['ours']:.0f}x)"
        + (f", (b) {ms(c['b'])} ({c['b'] / c['ours']:.0f}x)" if "b" in c else "")
    )
    print(machine_line())

    report = Report("bench/sandbox.py")
    k4 = 4 if 4 in ks else ks[len(ks) // 2]
    ours4 = median(t["ours", k4])
    what = f"episode latency: open + {k4} calls + close (ours {args.gap_ms:g} ms apart)"
    ra = median(t["a", k4]) / ours4
    report.add(what=what, competitor="(a) fresh `python3` per call (code-sandbox-service pattern)",
               ours=ms(ours4), theirs=ms(median(t["a", k4])), ratio=f"{ra:.0f}x faster", target=">= 50x", met=ra >= 50)  # fmt: skip
    if ("b", k4) in t:
        rb = median(t["b", k4]) / ours4
        report.add(what=what, competitor="(b) bubblewrap + `python3` per episode",
                   ours=ms(ours4), theirs=ms(median(t["b", k4])), ratio=f"{rb:.0f}x faster", target=">= 20x", met=rb >= 20)  # fmt: skip
    rc = ours4 / median(t["c", k4])
    report.add(what=what, competitor="(c) verl `FunctionTool` in process (no isolation)",
               ours=ms(ours4), theirs=ms(median(t["c", k4])), ratio=f"{rc:.1f}x slower (price of isolation)")  # fmt: skip
    for key, competitor in (("a", "(a) fresh `python3` per call"), ("b", "(b) bubblewrap + `python3` per episode")):
        if f"{key}{k4}" in cpu:
            report.add(what=f"episode CPU, all processes: open + {k4} calls + close", competitor=competitor,
                       ours=ms(cpu[f"ours{k4}"]), theirs=ms(cpu[f"{key}{k4}"]),
                       ratio=f"{cpu[f'{key}{k4}'] / cpu[f'ours{k4}']:.1f}x less")  # fmt: skip
    report.add(what="session open p50 (a hand-off to a spare: fork and confinement done ahead)", competitor="-",
               ours=ms(o50), theirs="-", ratio="-", target="<= 3 ms on 2 idle cores", met=o50 <= 0.003)  # fmt: skip
    for row in report.rows:
        if row.target:
            shown = row.ratio if row.ratio != "-" else row.ours
            print(f"target {row.target} ({row.competitor}): {shown} -> {verdict(row.met)}")
    report.write(args.json)


if __name__ == "__main__":
    main()
