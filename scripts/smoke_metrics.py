"""Print what scripts/gpu_smoke.sh measured, from verl's console logs; exit non-zero when a step is missing.

    python scripts/smoke_metrics.py SFT_LOG GRPO_LOG --grpo-steps N

verl's console logger writes one line per step, `step:N - key:value - key:value ...`; the
held-out validation before training is logged at step 0, the one after the last step with it.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

STEP_LINE = re.compile(r"\bstep:(\d+) - (.*)$")
GRPO_KEYS = [
    ("critic/score/mean", "reward"),
    ("astra/f1/mean", "f1"),
    ("astra/solved_rate", "solved"),
    ("astra/turns/mean", "turns"),
    ("astra/calls_per_episode/mean", "calls/ep"),
    ("astra/invalid_call_rate", "invalid"),
    ("astra/distractor_call_rate", "distractor"),
    ("astra/batch_filling/dispatched_prompts", "refills"),
    ("timing_s/step", "step_s"),
]
# held-out: the val split's reward (verl's core metric) and our reward extras, per data source
# (data sources contain slashes: astra/procedural)
HELD_OUT = re.compile(r"^val-(core|aux)/.+/(reward|f1|solved|calls|invalid_calls|final_answer_correct)/mean@\d+$")


def steps_of(log: Path) -> dict[int, dict[str, float]]:
    """Every `step:N - k:v - ...` line of a log (a later line of the same step adds its keys)."""
    steps: dict[int, dict[str, float]] = {}
    for line in log.read_text(errors="replace").splitlines():
        m = STEP_LINE.search(line.strip())
        if not m:
            continue
        row = steps.setdefault(int(m.group(1)), {})
        for kv in m.group(2).split(" - "):
            key, _, value = kv.partition(":")
            try:
                row[key.strip()] = float(value)
            except ValueError:
                continue  # a non-numeric value (verl logs a few strings)
    return steps


def sft_report(log: Path) -> list[str]:
    losses = {s: m["train/loss"] for s, m in steps_of(log).items() if "train/loss" in m}
    if not losses:
        return [f"{log}: no train/loss line: SFT did not complete a step"]
    first, last = min(losses), max(losses)
    print(f"SFT: {len(losses)} steps, loss {losses[first]:.3f} (step {first}) -> {losses[last]:.3f} (step {last})")
    return []


def grpo_report(log: Path, n_steps: int) -> list[str]:
    steps = steps_of(log)
    problems = []
    trained = sorted(s for s in steps if s > 0 and "critic/score/mean" in steps[s])
    print("step " + " ".join(f"{short:>10}" for _, short in GRPO_KEYS))
    for step in trained:
        print(f"{step:>4} " + " ".join(_cell(steps[step].get(k)) for k, _ in GRPO_KEYS))
    if trained != list(range(1, n_steps + 1)):
        problems.append(f"expected GRPO steps 1..{n_steps}, got {trained}")
    elif missing := [k for k, _ in GRPO_KEYS if k not in steps[n_steps]]:
        problems.append(f"missing from the step metrics: {missing}")
    before = {k: v for k, v in steps.get(0, {}).items() if HELD_OUT.match(k)}
    after = {k: v for k, v in steps.get(n_steps, {}).items() if HELD_OUT.match(k)}
    if not before or not after:
        problems.append(f"no held-out validation metrics {'before training' if not before else 'after the last step'}")
    print("held-out (val split)" + " " * 40 + "before      after")
    for key in sorted(before.keys() | after.keys()):
        print(f"  {key:<56}{_cell(before.get(key))} {_cell(after.get(key))}")
    return problems


def _cell(value: float | None) -> str:
    return f"{value:>10.3f}" if value is not None else f"{'-':>10}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sft_log", type=Path)
    parser.add_argument("grpo_log", type=Path)
    parser.add_argument("--grpo-steps", type=int, required=True)
    args = parser.parse_args(argv)
    problems = sft_report(args.sft_log) + grpo_report(args.grpo_log, args.grpo_steps)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
