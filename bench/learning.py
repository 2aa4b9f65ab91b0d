"""What training buys: SFT on golden demonstrations, then GRPO, measured on train and held-out environments.

    .venv/bin/python bench/learning.py --tier quick   # tiny random Qwen2 (1M parameters), 3 seeds, 60 min on 2 cores
    .venv/bin/python bench/learning.py --tier real    # SmolLM2-135M-Instruct (`python -m astra_verl.models smollm2`)

Every stage is the command a user runs (as `make demo` does), in a fresh process:

1. model: `python -m astra_verl.tiny_model` (quick; random weights, seeded) or `astra_verl.models smollm2` (real);
2. data, once per tier: procedural environments in three splits, each its own store and export:
   `train` (the environments SFT and GRPO see), `heldout_data` (the same domains and task shapes drawn
   with another seed: unseen worlds, entities, values and tool names) and `heldout_shape` (a scenario
   type absent from train); golden demonstrations of the train rows, a share with a failed call and its
   correction (`env_registry export-sft --recovery-share`);
3. base: the model before any training, greedy, on every split (`python -m astra_verl.eval envs`);
4. SFT: verl's SFT trainer on the demonstrations (`+recipe=astra_sft_cpu`);
5. GRPO: verl's PPO loop from the SFT checkpoint (`main_ppo +recipe=astra_cpu`) with verl's own
   validation (`val_before_train`, every `test_freq` steps, greedy: no batch filling) on the three
   splits; each split's rows carry its name as `data_source`, so verl reports each split apart.
   `--grpo-steps 0` stops after SFT and scores its checkpoint on every split with `eval envs` instead
   (the episodes verl's validation runs, `tests/training_cpu/test_eval_envs_agreement.py`; on 2 cores
   a fraction of the GRPO stage's two validations), for measuring SFT's transfer over more seeds.

Measured per step and seed, then mean ± standard error over seeds:

    train reward (greedy)     verl validation on the train environments (the policy's reward)
    train reward (T)          `astra/reward_all_groups/mean`: every rollout GRPO sampled that step at the
                              rollout temperature, before batch filling dropped any group
    heldout_data / _shape F1  verl validation, greedy
    invalid, turns            invalid calls / calls and assistant turns per episode, train split, greedy

Writes `<out>/learning.md` (the table, machine, wall times, verdicts), `<out>/learning.png` and
`<out>/learning.json`; each seed's runs stay under `<out>/seed<N>/`. A rerun reuses finished stages
(model, data, SFT checkpoint, GRPO metrics) unless `--fresh`.

The stages are in bench/learning_stages.py, what is read back from verl's logs in learning_logs.py,
the statistics in learning_stats.py and the report in learning_report.py; this file runs them.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

from learning_logs import curve, grpo_step_seconds, row_of, sft_step_seconds, split_of_envs, validation_rows
from learning_report import write_report
from learning_stages import (
    TIERS,
    Tier,
    build_data,
    build_model,
    demonstrations_file,
    demonstrations_for_seed,
    evaluate,
    grpo,
    sft,
)
from learning_stats import SeedRun

from astra_verl.demo import read_metrics


def run_seed(tier: Tier, seed: int, out: Path, data: dict[str, Path] | None) -> tuple[SeedRun, dict[str, Path]]:
    seed_dir = out / f"seed{seed}"
    seed_dir.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    t0 = time.perf_counter()
    model = build_model(tier, seed, out)
    data = data or build_data(tier, model, out)
    seconds["setup"] = time.perf_counter() - t0
    base_dir = (seed_dir if tier.model == "tiny" else out) / "base-eval"
    base_scores, base_rows, seconds["base_eval"] = evaluate(tier, model, data, base_dir)
    base = row_of(base_scores)
    print(f"seed {seed}: base model {base}", flush=True)
    demos = demonstrations_for_seed(tier, seed, demonstrations_file(tier, out), seed_dir)
    checkpoint, seconds["sft"], _ = sft(tier, seed, model, demos, seed_dir)
    losses = read_metrics(seed_dir / "sft.metrics.jsonl")
    loss = [losses[s]["train/loss"] for s in sorted(losses) if "train/loss" in losses[s]]
    print(f"seed {seed}: SFT loss {loss[0]:.3f} -> {loss[-1]:.3f} in {seconds['sft']:.0f} s", flush=True)
    seconds["sft_step"] = sft_step_seconds(seed_dir / "sft.log")
    if tier.grpo_steps > 0:
        steps, seconds["grpo"] = grpo(tier, seed, checkpoint, data, seed_dir)
        seconds["grpo_step"] = grpo_step_seconds(steps)
        rows = {"base": base_rows, **validation_rows(seed_dir / "validation", split_of_envs(data))}
        validated = curve(steps)
    else:  # SFT only: its checkpoint scored as the base model was (step "0" = after SFT, as verl numbers it)
        sft_scores, sft_rows, seconds["sft_eval"] = evaluate(tier, checkpoint, data, seed_dir / "sft-eval", "sft")
        rows = {"base": base_rows, "0": sft_rows}
        validated = {0: row_of(sft_scores)}
    run_ = SeedRun(seed, base, validated, seconds, (loss[0], loss[-1]), rows)
    for s, row in run_.steps.items():
        print(f"seed {seed} step {s}: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
    return run_, data


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tier", choices=sorted(TIERS), required=True)
    p.add_argument("--out", default=None, help="run folder (default runs/learning/<tier>)")
    p.add_argument("--seeds", default=None, help="comma-separated (default: the tier's, 0,1,2)")
    p.add_argument("--sft-steps", type=int, default=None)
    p.add_argument(
        "--grpo-steps", type=int, default=None, help="0: stop after SFT and score its checkpoint with `eval envs`"
    )
    p.add_argument("--test-freq", type=int, default=None, help="GRPO steps between validations")
    p.add_argument("--temperature", type=float, default=None, help="GRPO rollout temperature")
    p.add_argument("--grpo-lr", type=float, default=None)
    p.add_argument("--limit-envs", type=int, default=None, help="at most N environments per split (smoke runs)")
    p.add_argument("--fresh", action="store_true", help="delete the run folder first")
    args = p.parse_args(argv)
    tier = TIERS[args.tier]
    changes = {
        "sft_steps": args.sft_steps, "grpo_steps": args.grpo_steps, "test_freq": args.test_freq,
        "temperature": args.temperature, "grpo_lr": args.grpo_lr,
        "seeds": tuple(int(s) for s in args.seeds.split(",")) if args.seeds else None,
    }  # fmt: skip
    tier = replace(tier, **{k: v for k, v in changes.items() if v is not None})
    if args.limit_envs:
        tier = replace(tier, splits=tuple(replace(s, envs=min(s.envs, args.limit_envs)) for s in tier.splits))
    out = Path(args.out or Path("runs") / "learning" / tier.name).resolve()
    if args.fresh:
        shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runs, data = [], None
    for seed in tier.seeds:
        run_, data = run_seed(tier, seed, out, data)
        runs.append(run_)
    report = write_report(tier, runs, out, time.perf_counter() - t0, argv if argv is not None else sys.argv[1:])
    print(report.read_text())
    print(f"plot: {out / 'learning.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
