"""The demo's rise over seeds: `make demo`'s own pipeline (astra_verl.demo.main), once per seed.

    python bench/demo_rise.py                      # seeds 0..4, working folders runs/demo_rise/seed<N>
    python bench/demo_rise.py --seeds 0,1 --out runs/x

Each seed varies the tiny model's initialisation, the environments, the split, and the SFT and GRPO
data order (the demo's --seed). Per seed it prints the greedy validation reward on the train
environments after SFT and after GRPO (verl's validation, astra_f1) and the rise; then the mean rise
± its standard error over seeds and in how many seeds the rise was positive. The demo's own output
goes to <out>/seed<N>.log, its result to <out>/seed<N>.json; a rerun reuses the seeds that have one
if it ran with the same demo settings, defaults included (other settings are refused). Extra arguments after `--` go
to the demo unchanged. `--jobs 2` runs two seeds at a time (each needs ~4 GB of memory in its GRPO
stage); its wall time depends on it. What repeats: a seed's after-SFT reward, on one machine. GRPO's
sampled rollouts are batched as requests arrive, so its after-GRPO reward varies between runs.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import sys
import time
from pathlib import Path

from astra_foundation.stats import mean_se
from astra_verl import demo


def summarize(rises: list[float]) -> tuple[float, float, int]:
    """(mean, standard error over seeds (`astra_foundation.stats`: NaN for one seed), how many positive)."""
    mean, se = mean_se(rises)
    return mean, se, sum(r > 0 for r in rises)


def learning_steps(metrics: Path) -> tuple[int, int] | None:
    """(GRPO steps whose update moved the policy, steps) from the demo's `grpo.metrics.jsonl`: a step
    whose every group had equal rewards has zero advantage and a zero gradient, and teaches nothing
    (seed 4 at the default settings: 7 of 24, and no rise). None if the file is absent."""
    if not metrics.is_file():
        return None
    norms = [
        record["data"]["actor/grad_norm"]
        for record in map(json.loads, metrics.read_text().splitlines())
        if "actor/grad_norm" in record.get("data", {})
    ]
    return sum(n > 0 for n in norms), len(norms)


def demo_settings(demo_args: list[str]) -> dict:
    """What the demo runs with, defaults included (a changed default must not pass for the old one);
    the working folder and seed are the bench's own."""
    settings = vars(demo.parser().parse_args(demo_args))
    return {k: v for k, v in settings.items() if k not in ("out", "seed")}


def run_seed(seed: int, out: Path, demo_args: list[str], stage_timeout: float) -> dict | str:
    """The seed's row, or why its demo failed (a string: one failed seed does not end the others)."""
    done = out / f"seed{seed}.json"
    settings = demo_settings(demo_args)
    if done.exists():  # resumable: a seed that finished keeps its row (the table says "reused")
        row = json.loads(done.read_text())
        if row.get("settings") != settings:  # a row of other settings would pass for these in the table
            differ = sorted(k for k in settings if (row.get("settings") or {}).get(k) != settings[k])
            return (
                f"{done} was run with other demo settings ({', '.join(differ)}; recorded: "
                f"{row.get('settings', 'none')}): give another --out, or delete that file to rerun the seed"
            )
        return {"learning_steps": learning_steps(out / f"seed{seed}" / "grpo.metrics.jsonl"), **row, "reused": True}
    log = out / f"seed{seed}.log"
    os.environ["ASTRA_DEMO_STAGE_TIMEOUT_S"] = str(stage_timeout)  # this seed's process only
    t0 = time.perf_counter()
    with log.open("w") as fh, contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
        try:
            result = demo.main(["--out", str(out / f"seed{seed}"), "--seed", str(seed), *demo_args])
        except demo.DemoError as exc:
            return f"demo failed: {str(exc).splitlines()[0]} (log {log})"
    r = result["rise"]
    row = {
        "seed": seed,
        "after_sft": result["before"]["reward"],
        "after_grpo": result["after"]["reward"],
        "rise": result["after"]["reward"] - result["before"]["reward"],
        "paired_se": r.se,
        "envs": r.n,
        "wall_s": time.perf_counter() - t0,
        "learning_steps": learning_steps(out / f"seed{seed}" / "grpo.metrics.jsonl"),
        "settings": settings,
    }
    (out / f"seed{seed}.json").write_text(json.dumps(row, indent=1))
    return row


def steps_text(steps: tuple[int, int] | list[int] | None) -> str:
    return "?" if steps is None else f"{steps[0]} of {steps[1]}"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(
        prog="python bench/demo_rise.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds (default 0,1,2,3,4)")
    p.add_argument("--out", default="runs/demo_rise", help="working folder (default runs/demo_rise)")
    p.add_argument("--jobs", type=int, default=1, help="seeds run at a time (default 1)")
    p.add_argument(
        "--stage-timeout",
        type=float,
        default=3600,
        help="seconds a demo stage may take (default 3600: runs under load)",
    )
    p.add_argument("demo_args", nargs="*", help="after `--`: arguments passed to the demo")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    print(
        f"{'seed':>4} {'after SFT':>10} {'after GRPO':>11} {'rise':>7} {'paired SE':>10} {'envs':>5} "
        f"{'steps with a gradient':>22} {'wall s':>7}"
    )
    rows = []
    with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = {pool.submit(run_seed, seed, out, args.demo_args, args.stage_timeout): seed for seed in seeds}
        for fut in concurrent.futures.as_completed(futures):
            try:
                row = fut.result()
            except Exception as exc:  # a seed's process died (killed for memory): report it, go on
                row = f"failed: {type(exc).__name__}: {exc}"
            if isinstance(row, str):
                print(f"{futures[fut]:>4} {row}", flush=True)
                continue
            rows.append(row)
            print(
                f"{row['seed']:>4} {row['after_sft']:>10.3f} {row['after_grpo']:>11.3f} {row['rise']:>+7.3f} "
                f"{row['paired_se']:>10.3f} {row['envs']:>5} {steps_text(row.get('learning_steps')):>22} "
                f"{row['wall_s']:>7.0f}{' (reused)' if row.get('reused') else ''}",
                flush=True,
            )
    rows.sort(key=lambda r: r["seed"])
    (out / "demo_rise.json").write_text(json.dumps(rows, indent=1))
    if not rows:
        sys.exit("every seed failed")
    mean, se, positive = summarize([r["rise"] for r in rows])
    spread = f"± {se:.3f} (SE over {len(rows)} seeds)" if len(rows) > 1 else "(one seed: no SE)"
    print(f"mean rise {mean:+.3f} {spread}; positive in {positive} of {len(seeds)}")


if __name__ == "__main__":
    main()
