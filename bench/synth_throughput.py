"""Environment-synthesis throughput against a fake OpenAI endpoint with a fixed latency.

    .venv/bin/python bench/synth_throughput.py [--envs-per-domain 26] [--concurrency 64] [--latency 0.2] [--jitter 0]
        [--input DOMAINS.jsonl]

The domains are the bundled sample (12 domains x 26 = 312 environments; `--input` takes
ASTRA's en/domains.jsonl instead: 39 domains, use --envs-per-domain 8 for the same 312).

A loopback server (`astra_foundation.llm.fake_server`, its own process) answers every request after
`--latency` seconds (or a lognormal draw with that mean: `--jitter 1` is a long tail) with the
canned, valid reply of `data_synth.env.canned`, so every record goes the whole way: decompose,
necessity, four judges, select, tool synthesis with the real sandbox check, merge with
golden-call replay. Timed: those steps (publish/export/report are not LLM-bound and left out).
After an untimed warm-up run (one-off costs: lazy imports, first connections), the same
pipeline runs twice:

    concurrent   C (--concurrency, default 64) requests in flight, 2C records in flight
    sequential   one request and one record at a time (on a few environments)

Printed: environments per minute of each; the concurrent run against the ideal bound
C / latency / (requests per environment), i.e. the endpoint kept exactly C-busy with no
client, pipeline or sandbox overhead (cache hits cost no request); the pipeline process's CPU
per environment; and the speed-up over the sequential run. On a small machine the sandbox,
the fake server and the pipeline share the cores: compare runs on an otherwise idle machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchkit import Report, machine_line

from data_synth.env.cli import build_parser, make_run
from data_synth.env.report import env_funnel
from data_synth.env.run import EnvRun
from data_synth.env.seeds import sample_input


def start_server(latency: float, jitter: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "astra_foundation.llm.fake_server", "--latency", str(latency), "--jitter", str(jitter),
         "--responder", "data_synth.env.canned:respond_http"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"fake server did not start: {line!r}")
    return proc, line.split()[1]


def process_cpu(pid: int) -> float:
    """CPU seconds of a live process and of the children it has reaped (utime+stime+cutime+cstime)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


async def synthesize(run: EnvRun) -> float:
    """Run the timed steps; returns the sandbox's CPU seconds: its workers and the session
    processes they forked and reaped, read before the pool closes (under bubblewrap the workers
    are not our children, so this process's rusage would not see them)."""
    ctx = await run.context()  # the context `synthesize` uses; its pool is the sandbox measured
    try:
        await run.synthesize()
        return sum(process_cpu(pid) for pid in ctx.sandbox.worker_pids() if pid)
    finally:
        await ctx.aclose()


def run_pipeline(base_url: str, inputs: Path, run_dir: Path, *, samples: int, limit: int | None,
                 llm_concurrency: int, records: int, server_pid: int) -> dict:  # fmt: skip
    argv = [
        "run", "--out", str(run_dir), "--mode", "domain", "--input", str(inputs), "--samples", str(samples),
        "--percentile", "0", "--quiet", "--base-url", base_url, "--model", "fake",
        "--concurrency", str(records),
    ]  # fmt: skip
    if limit:
        argv += ["--limit", str(limit)]
    args = build_parser().parse_args(argv)
    run = make_run(args)
    # `--concurrency` is the records in flight and, unless told otherwise, the client's requests:
    # this bench holds requests at C with 2C records in flight
    run.factory.llm = run.factory.llm.model_copy(update={"max_concurrency": llm_concurrency})
    t0, c0, s0 = time.perf_counter(), time.process_time(), process_cpu(server_pid)
    sandbox_cpu = asyncio.run(synthesize(run))
    elapsed, cpu, server_cpu = time.perf_counter() - t0, time.process_time() - c0, process_cpu(server_pid) - s0
    funnel = env_funnel(run_dir)
    steps = {s.step: s for s in funnel.steps}
    requests = {name: s.usage.requests for name, s in steps.items()}
    return {
        "envs": steps["env.merge"].ok,
        "seconds": elapsed,
        "cpu_s": cpu,
        "sandbox_cpu_s": sandbox_cpu,
        "server_cpu_s": server_cpu,
        "calls": sum(s.usage.completions for s in funnel.steps),
        "requests": sum(requests.values()),
        "qa_requests": sum(requests[n] for n in ("env.decompose", "env.necessity", "env.verify")),
        "tool_requests": requests["env.tools"] + requests["env.merge"],
        "timings": run.timings,
        "rejected": sum(s.rejected + s.error for s in funnel.steps),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input", type=Path, default=sample_input("domain"), help="domains JSONL (default: bundled sample)")
    p.add_argument("--envs-per-domain", type=int, default=26, help="samples per domain (12 sample domains)")
    p.add_argument("--concurrency", type=int, default=64, help="LLM requests in flight")
    p.add_argument("--latency", type=float, default=0.2, help="seconds per fake completion")
    p.add_argument("--jitter", type=float, default=0.0,
                   help="lognormal shape of the latency, mean --latency (0: fixed; 1: a long tail)")  # fmt: skip
    p.add_argument("--sequential-envs", type=int, default=4, help="environments in the sequential run")
    p.add_argument(
        "--quick",
        action="store_true",
        help="a shorter sequential run (make bench); the concurrent run "
        "keeps its size: a smaller one is dominated by its ramp-up and tail",
    )
    p.add_argument("--json", metavar="PATH", help="write the summary rows as JSON")
    a = p.parse_args()
    if a.quick:
        a.sequential_envs = 3
    cores = os.cpu_count() or 1
    print(machine_line())
    server, base_url = start_server(a.latency, a.jitter)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            # untimed: the first run in a process pays one-off costs (lazy imports, the fake
            # server's first connections) that a long synthesis job does not pay per record
            run_pipeline(base_url, a.input, tmp / "warm-up", samples=1, limit=16, llm_concurrency=a.concurrency,
                         records=2 * a.concurrency, server_pid=server.pid)  # fmt: skip
            conc = run_pipeline(base_url, a.input, tmp / "concurrent", samples=a.envs_per_domain, limit=None,
                                llm_concurrency=a.concurrency, records=2 * a.concurrency, server_pid=server.pid)  # fmt: skip
            seq = run_pipeline(base_url, a.input, tmp / "sequential", samples=1, limit=a.sequential_envs,
                               llm_concurrency=1, records=1, server_pid=server.pid)  # fmt: skip
    finally:
        server.kill()
    # the bound counts requests that reach the endpoint: cache hits (identical prompts within
    # the run) cost no latency
    calls_per_env = conc["requests"] / max(conc["envs"], 1)
    ideal = a.concurrency / a.latency / calls_per_env * 60
    rate = conc["envs"] / conc["seconds"] * 60
    seq_rate = seq["envs"] / seq["seconds"] * 60
    seq_ideal = 1 / a.latency / (seq["requests"] / max(seq["envs"], 1)) * 60
    print(
        f"latency {a.latency * 1000:.0f} ms per completion, {calls_per_env:.2f} requests per environment "
        f"({conc['calls'] / max(conc['envs'], 1):.2f} completions incl. cache hits)"
    )
    print(f"concurrent (C={a.concurrency}): {conc['envs']} envs in {conc['seconds']:.1f} s = {rate:.0f} envs/min "
          f"({conc['requests']} requests, {conc['rejected']} rejected/errored; pipeline process CPU "
          f"{conc['cpu_s']:.1f} s = {1000 * conc['cpu_s'] / max(conc['envs'], 1):.0f} ms per env)")  # fmt: skip
    print(f"  ideal bound C/latency/calls = {ideal:.0f} envs/min -> {100 * rate / ideal:.1f}% of ideal")
    per_s = a.concurrency / a.latency  # requests per second the endpoint can serve at C
    t = conc["timings"]
    print(
        f"  decompose>necessity>verify (LLM only): {t['qa_chain']:.1f} s, bound {conc['qa_requests'] / per_s:.1f} s "
        f"-> {100 * conc['qa_requests'] / per_s / t['qa_chain']:.0f}% of ideal"
    )
    print(
        f"  tools>merge (LLM + sandbox checks and golden replay): {t['tool_chain']:.1f} s, LLM bound "
        f"{conc['tool_requests'] / per_s:.1f} s -> {100 * conc['tool_requests'] / per_s / t['tool_chain']:.0f}% of ideal"
    )
    print(f"sequential (C=1): {seq['envs']} envs in {seq['seconds']:.1f} s = {seq_rate:.1f} envs/min "
          f"({100 * seq_rate / seq_ideal:.1f}% of its bound {seq_ideal:.1f})")  # fmt: skip
    print(f"speed-up concurrent / sequential: {rate / seq_rate:.1f}x")

    envs = max(conc["envs"], 1)
    parts = {"pipeline process (steps, LLM client, the pool's event loop)": conc["cpu_s"],
             "sandbox (workers and their session processes)": conc["sandbox_cpu_s"],
             "fake LLM server": conc["server_cpu_s"]}  # fmt: skip
    total = sum(parts.values())
    ideal_s = conc["envs"] / ideal * 60  # the concurrent run's length at the ideal bound
    print(f"\nCPU per environment (concurrent run), {cores} core(s) here:")
    for name, cpu in parts.items():
        print(f"  {name:<62} {1000 * cpu / envs:7.0f} ms")
    print(f"  {'total':<62} {1000 * total / envs:7.0f} ms")
    print(
        f"  busy cores during the run: {total / conc['seconds']:.2f} of {cores}; to run at the ideal bound "
        f"({ideal_s:.1f} s) this work needs {total / ideal_s:.2f} cores, and the pipeline process alone "
        f"{100 * conc['cpu_s'] / ideal_s:.0f}% of one (it is one thread)"
    )
    print(machine_line())
    print(json.dumps({"envs_per_min": round(rate, 1), "ideal_envs_per_min": round(ideal, 1),
                      "ratio_to_ideal": round(rate / ideal, 3), "sequential_envs_per_min": round(seq_rate, 2),
                      "speedup": round(rate / seq_rate, 1), "cpu_ms_per_env": {k.split(" (")[0]: round(1000 * v / envs)
                      for k, v in parts.items()}, "cores_for_ideal": round(total / ideal_s, 2)}))  # fmt: skip
    report = Report("bench/synth_throughput.py")
    report.add(what=f"env synthesis at C={a.concurrency}, {a.latency * 1000:.0f} ms fake LLM latency",
               competitor="the ideal bound: the endpoint kept C-busy, zero client/sandbox cost",
               ours=f"{rate:.0f} envs/min", theirs=f"{ideal:.0f} envs/min", ratio=f"{100 * rate / ideal:.0f}% of ideal",
               target=">= 80%", met=rate / ideal >= 0.8)  # fmt: skip
    report.add(what="  CPU per environment; cores needed to reach the bound",
               competitor="-", ours=f"{1000 * total / envs:.0f} ms ({1000 * conc['sandbox_cpu_s'] / envs:.0f} sandbox)",
               theirs="-", ratio=f"{total / ideal_s:.1f} cores")  # fmt: skip
    report.add(what="env synthesis, concurrent vs one request at a time", competitor="sequential pipeline (C=1)",
               ours=f"{rate:.0f} envs/min", theirs=f"{seq_rate:.1f} envs/min", ratio=f"{rate / seq_rate:.0f}x")  # fmt: skip
    report.write(a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
