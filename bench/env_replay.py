"""Golden-call replay throughput: sequential vs concurrent sessions in the project sandbox.

    python bench/env_replay.py --n 600

Replays the golden calls of N procedural environments with `concurrency=1` and with the
concurrent default, and prints env/s and calls/s for both plus the ratio.
"""

from __future__ import annotations

import argparse
import time

from benchkit import Report, machine_line

from env_registry.families.procedural import generate
from env_registry.validate import validate_envs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--quick", action="store_true", help="300 environments (make bench)")
    ap.add_argument("--json", metavar="PATH", help="write the summary rows as JSON")
    args = ap.parse_args()
    if args.quick:
        args.n = 300
    print(machine_line())
    envs = generate(args.n, seed=0)
    calls = sum(len(t.golden_calls) for e in envs for t in e.tools)
    results = {}
    for c in (1, args.concurrency):
        t = time.perf_counter()
        report = validate_envs(envs, concurrency=c, progress=False)
        dt = time.perf_counter() - t
        assert report.ok, [str(i) for i in report.all_issues()[:3]]
        results[c] = dt
        print(
            f"concurrency {c:>3}: {args.n} envs, {calls} calls in {dt:.2f} s = {args.n / dt:.0f} env/s, {calls / dt:.0f} calls/s"
        )
    print(f"speed-up concurrent/sequential: {results[1] / results[args.concurrency]:.2f}x")
    print(machine_line())
    report = Report("bench/env_replay.py")
    report.add(what=f"golden-call replay of {args.n} procedural environments (validation)",
               competitor="the same replay one environment at a time",
               ours=f"{args.n / results[args.concurrency]:.0f} env/s", theirs=f"{args.n / results[1]:.0f} env/s",
               ratio=f"{results[1] / results[args.concurrency]:.2f}x")  # fmt: skip
    report.write(args.json)


if __name__ == "__main__":
    main()
