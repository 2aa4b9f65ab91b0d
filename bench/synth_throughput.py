"""Environment-synthesis throughput against a fake OpenAI endpoint with a fixed latency.

    .venv/bin/python bench/synth_throughput.py [--envs-per-domain 26] [--concurrency 64] [--latency 0.2] [--jitter 0]
        [--input DOMAINS.jsonl]

The domains are the bundled sample (12 domains x 26 = 312 environments; `--input` takes
ASTRA's en/domains.jsonl instead: 39 domains, use --envs-per-domain 8 for the same 312).

A loopback server (`data_synth.llm.fake_server`, its own process) answers every request after
`--latency` seconds (or a lognormal draw with that mean: `--jitter 1` is a long tail) with the
canned, valid reply of `data_synth.env.canned`, so every record goes the whole way: decompose,
necessity, four judges, select, tool synthesis with the real sandbox check, merge with
golden-call replay. Timed: those steps (publish/export/report are not LLM-bound and left out).
After an untimed warm-up run (one-off costs: lazy imports, first connections), the same
pipeline runs twice:

    concurrent   --llm-concurrency C (default 64) requests in flight, 2C records in flight
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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from data_synth.env.cli import EnvRun, build_parser
from data_synth.env.report import env_funnel
from data_synth.env.seeds import sample_input


def start_server(latency: float, jitter: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "data_synth.llm.fake_server", "--latency", str(latency), "--jitter", str(jitter),
         "--responder", "data_synth.env.canned:respond_http"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit(f"fake server did not start: {line!r}")
    return proc, line.split()[1]


def run_pipeline(base_url: str, inputs: Path, run_dir: Path, *, samples: int, limit: int | None,
                 llm_concurrency: int, records: int) -> dict:  # fmt: skip
    argv = [
        "run", "--run-dir", str(run_dir), "--mode", "domain", "--input", str(inputs), "--samples", str(samples),
        "--percentile", "0", "--quiet", "--llm-base-url", base_url, "--llm-model", "fake",
        "--llm-concurrency", str(llm_concurrency), "--concurrency", str(records),
    ]  # fmt: skip
    if limit:
        argv += ["--limit", str(limit)]
    args = build_parser().parse_args(argv)
    run = EnvRun(args)
    t0, c0 = time.perf_counter(), time.process_time()
    asyncio.run(run.run(["synthesize"]))
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    funnel = env_funnel(run_dir)
    steps = {s.step: s for s in funnel.steps}
    requests = {name: s.usage.requests for name, s in steps.items()}
    return {
        "envs": steps["env.merge"].ok,
        "seconds": elapsed,
        "cpu_s": cpu,
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
    a = p.parse_args()
    server, base_url = start_server(a.latency, a.jitter)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            # untimed: the first run in a process pays one-off costs (lazy imports, the fake
            # server's first connections) that a long synthesis job does not pay per record
            run_pipeline(base_url, a.input, tmp / "warm-up", samples=1, limit=16, llm_concurrency=a.concurrency,
                         records=2 * a.concurrency)  # fmt: skip
            conc = run_pipeline(base_url, a.input, tmp / "concurrent", samples=a.envs_per_domain, limit=None,
                                llm_concurrency=a.concurrency, records=2 * a.concurrency)  # fmt: skip
            seq = run_pipeline(base_url, a.input, tmp / "sequential", samples=1, limit=a.sequential_envs,
                               llm_concurrency=1, records=1)  # fmt: skip
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
    print(json.dumps({"envs_per_min": round(rate, 1), "ideal_envs_per_min": round(ideal, 1),
                      "ratio_to_ideal": round(rate / ideal, 3), "sequential_envs_per_min": round(seq_rate, 2),
                      "speedup": round(rate / seq_rate, 1)}))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
