"""Tool-call latency and throughput: our warm, isolated SandboxPool versus a fresh python3 per call.

The baseline is what ASTRA's released scripts rely on: a code-sandbox service that starts a new
`python3` for every call, runs the tool's source followed by the call, and reads stdout. Both
sides run the same tool with the same arguments in the same run; the pool runs with its full
isolation (bwrap when available, else the process backend; see the printed isolation line).

    .venv/bin/python bench/sandbox.py                 # defaults, < 1 min
    .venv/bin/python bench/sandbox.py --calls 2000 --workers 1,2,4,8 --seconds 3

Prints p50/p99 latency of both, their ratio, calls/s of the pool for each worker count (one
concurrent episode per worker), the baseline's calls/s at the same concurrency, and the cost
of opening a session (paid once per episode).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from astra_verl.sandbox import Module, Program, SandboxConfig, SandboxPool
from astra_verl.sandbox.launch import python_executable

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
PROGRAM = Program((Module("search_flights", TOOL),))
# A tool that computes for a few milliseconds: its throughput is bound by cores, not by the pool.
HEAVY = Program(
    (Module("search_flights", TOOL + "\n_search = search_flights\ndef search_flights(**kw):\n"
            "    sum(i * i for i in range(60000))\n    return _search(**kw)\n"),)
)  # fmt: skip


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


# ---------------------------------------------------------------- baseline: fresh python3 per call
def baseline_call(python: str) -> float:
    code = TOOL + f"\nprint(search_flights(**{ARGS!r}))\n"
    t0 = time.perf_counter()
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    elapsed = time.perf_counter() - t0
    if out.returncode != 0 or "CA1501" not in out.stdout:
        raise RuntimeError(f"baseline call failed: {out.stderr[-300:]}")
    return elapsed


def baseline_throughput(python: str, concurrency: int, calls: int) -> float:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(lambda _: baseline_call(python), range(calls)))
    return calls / (time.perf_counter() - t0)


# ---------------------------------------------------------------- ours
async def pool_latency(config: SandboxConfig, calls: int) -> tuple[list[float], list[float], str]:
    async with SandboxPool(config) as pool:
        session = await pool.open_session(PROGRAM)
        for _ in range(20):  # warm-up
            await pool.call(session, "search_flights", "search_flights", ARGS)
        lat = []
        for _ in range(calls):
            t0 = time.perf_counter()
            r = await pool.call(session, "search_flights", "search_flights", ARGS)
            lat.append(time.perf_counter() - t0)
            if not r.ok:
                raise RuntimeError(f"pool call failed: {r.text}")
        await pool.close_session(session)
        opens = []
        for _ in range(max(20, calls // 10)):
            t0 = time.perf_counter()
            s = await pool.open_session(PROGRAM)
            opens.append(time.perf_counter() - t0)
            await pool.close_session(s)
        return lat, opens, pool.isolation


async def pool_throughput(
    config: SandboxConfig, program: Program, episodes: int, seconds: float
) -> tuple[float, float]:
    """calls/s, and the pool process's own CPU time per call (the event loop's share)."""
    async with SandboxPool(config) as pool:
        sessions = [await pool.open_session(program) for _ in range(episodes)]
        for s in sessions:
            await pool.call(s, "search_flights", "search_flights", ARGS)
        done = 0
        deadline = time.perf_counter() + seconds

        async def episode(s):
            nonlocal done
            while time.perf_counter() < deadline:
                r = await pool.call(s, "search_flights", "search_flights", ARGS)
                if not r.ok:
                    raise RuntimeError(r.text)
                done += 1

        t0, c0 = time.perf_counter(), time.process_time()
        await asyncio.gather(*(episode(s) for s in sessions))
        return done / (time.perf_counter() - t0), (time.process_time() - c0) / max(done, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1000, help="sequential pool calls for latency (default 1000)")
    ap.add_argument("--baseline-calls", type=int, default=40, help="sequential fresh-python3 calls (default 40)")
    ap.add_argument("--workers", default="1,2,4", help="worker counts for the throughput table (default 1,2,4)")
    ap.add_argument("--seconds", type=float, default=2.0, help="duration of each throughput run (default 2)")
    ap.add_argument("--backend", default="auto", choices=["auto", "bwrap", "process"], help="pool backend")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    args = ap.parse_args()
    worker_counts = [int(w) for w in args.workers.split(",")]
    python = python_executable()
    cores = os.cpu_count() or 1

    print(f"machine: {cores} CPU core(s); python {sys.version.split()[0]} at {python}")
    print(f"tool: search_flights (mock data, validation, dict result); args {json.dumps(ARGS)}\n")

    base = [baseline_call(python) for _ in range(args.baseline_calls)]
    lat, opens, isolation = asyncio.run(pool_latency(SandboxConfig(workers=1, backend=args.backend), args.calls))
    print(f"isolation: {isolation}\n")
    b50, b99, p50, p99 = percentile(base, 0.5), percentile(base, 0.99), percentile(lat, 0.5), percentile(lat, 0.99)
    print("latency per call        p50          p99          mean")
    print(f"  fresh python3      {b50 * 1e3:8.2f} ms  {b99 * 1e3:8.2f} ms  {statistics.mean(base) * 1e3:8.2f} ms")
    print(f"  SandboxPool        {p50 * 1e3:8.3f} ms  {p99 * 1e3:8.3f} ms  {statistics.mean(lat) * 1e3:8.3f} ms")
    print(f"  speed-up           {b50 / p50:8.0f} x    {b99 / p99:8.0f} x\n")
    o50 = percentile(opens, 0.5)
    print(f"session open (once per episode): p50 {o50 * 1e3:.2f} ms, p99 {percentile(opens, 0.99) * 1e3:.2f} ms\n")

    print(f"throughput, one concurrent episode per worker; this machine has {cores} CPU core(s)")
    rows = []
    for w in worker_counts:
        cfg = SandboxConfig(workers=w, backend=args.backend)
        light, parent_cpu = asyncio.run(pool_throughput(cfg, PROGRAM, w, args.seconds))
        heavy, _ = asyncio.run(pool_throughput(cfg, HEAVY, w, args.seconds))
        theirs = baseline_throughput(python, w, max(8, 4 * w))
        rows.append(
            {"workers": w, "pool_calls_per_s": light, "pool_heavy_calls_per_s": heavy, "baseline_calls_per_s": theirs,
             "pool_parent_cpu_per_call_s": parent_cpu}
        )  # fmt: skip
        print(
            f"  workers={w}:  SandboxPool {light:7.0f} calls/s (pool process {parent_cpu * 1e6:.0f} us CPU per call)"
            f"  | ~4 ms tool {heavy:6.0f} calls/s  | fresh python3 {theirs:5.1f} calls/s ({light / theirs:.0f} x)"
        )
    print(
        "  the light tool is bound by the pool's single event-loop thread (one pool per trainer process);\n"
        f"  the heavy tool by the {cores} core(s): it scales with workers up to the core count"
    )

    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "cores": cores,
                    "isolation": isolation,
                    "baseline_p50_s": b50,
                    "baseline_p99_s": b99,
                    "pool_p50_s": p50,
                    "pool_p99_s": p99,
                    "speedup_p50": b50 / p50,
                    "session_open_p50_s": o50,
                    "throughput": rows,
                },
                f,
                indent=2,
            )


if __name__ == "__main__":
    main()
