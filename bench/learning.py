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
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from astra_verl.demo import read_metrics, run  # noqa: E402

HOUR = 3600.0


@dataclass(frozen=True)
class Split:
    name: str
    envs: int
    seed: int  # generator seed: another seed draws other worlds
    scenario_types: tuple[str, ...]


@dataclass(frozen=True)
class Tier:
    name: str
    model: str  # "tiny" | "smollm2"
    splits: tuple[Split, ...]
    max_hops: int = 2
    recovery_share: float = 0.2
    # the SFT demonstrations' train export: irrelevant-tool mixing (env_registry export-parquet
    # --mixing) and the share of rows given a no-tool twin (export-sft --no-tool-share)
    sft_mixing: str = "none"
    no_tool_share: float = 0.0
    max_prompt_length: int = 2048
    max_response_length: int = 512
    sft_steps: int = 240
    sft_lr: float = 3e-3
    sft_batch: int = 2
    grpo_steps: int = 48
    test_freq: int = 8
    temperature: float = 0.5
    grpo_lr: float = 1e-4
    rollout_n: int = 4
    train_batch: int = 2
    seeds: tuple[int, ...] = (0, 1, 2)
    # verl 0.9.1's SFT trainer shuffles with DistributedSampler's fixed seed 0 whatever `trainer.seed`
    # says, so from one pretrained model every seed trained the same checkpoint (seeds 0 and 1 of the
    # real tier: byte-identical). With this set, seed N's demonstrations are the export permuted by N
    # (seed 0: the export's own order). The quick tier's seeds differ by the random model already.
    sft_order_by_seed: bool = False
    extra_grpo: tuple[str, ...] = field(default_factory=tuple)


SHAPES_SEEN = ("single_hop", "multi_hop", "parallel_single_hop")
QUICK = Tier(
    name="quick",
    model="tiny",
    splits=(
        Split("train", 12, 0, SHAPES_SEEN),
        Split("heldout_data", 8, 1, SHAPES_SEEN),
        Split("heldout_shape", 8, 2, ("parallel_multi_hop",)),
    ),
)
# Sized for 2 CPU cores (SmolLM2-135M: ~7 s per 900-token forward+backward, ~22 s to sample 8 x 64 tokens
# after an 800-token prompt, idle): one seed, its SEs over environments (paired, before vs after); on a GPU,
# more environments, steps and seeds (--seeds, --grpo-steps).
REAL = Tier(
    name="real",
    model="smollm2",
    splits=(
        Split("train", 24, 0, SHAPES_SEEN),
        Split("heldout_data", 12, 1, SHAPES_SEEN),
        Split("heldout_shape", 8, 2, ("parallel_multi_hop",)),
    ),
    max_response_length=384,
    sft_steps=80,
    sft_lr=1e-4,
    grpo_steps=8,
    test_freq=8,
    grpo_lr=1e-6,
    seeds=(0,),
    sft_order_by_seed=True,
)
TIERS = {t.name: t for t in (QUICK, REAL)}


def py(*args: str) -> list[str]:
    return [sys.executable, *args]


# -- stages -------------------------------------------------------------------------------------


def build_model(tier: Tier, seed: int, root: Path) -> Path:
    """The base model: a seeded random tiny Qwen2, or SmolLM2 converted from its GGUF (shared by seeds)."""
    if tier.model == "tiny":
        path = root / f"seed{seed}" / "base-model"
        if not (path / "config.json").exists():
            run(py("-m", "astra_verl.tiny_model", str(path), "--seed", str(seed)), root)
        return path
    path = root / "base-model"
    if not (path / "config.json").exists():
        run(py("-m", "astra_verl.models", "smollm2", str(path)), root, timeout=HOUR)
    return path


def build_data(tier: Tier, tokenizer: Path, root: Path) -> dict[str, Path]:
    """Per split a store and an export (all rows in one parquet, `data_source` = the split's name),
    and the golden demonstrations of the train rows (`demonstrations_file`)."""
    data = root / "data"
    out = {s.name: data / f"{s.name}.parquet" for s in tier.splits}
    if not all(p.exists() for p in out.values()):
        shutil.rmtree(data, ignore_errors=True)
        for split in tier.splits:
            store, export = data / split.name / "store", data / split.name / "rl"
            run(py("-m", "env_registry", "--store", str(store), "-q", "generate", "--n", str(split.envs),
                   "--seed", str(split.seed), "--max-hops", str(tier.max_hops),
                   "--scenario-types", ",".join(split.scenario_types)), root)  # fmt: skip
            run(py("-m", "env_registry", "--store", str(store), "-q", "validate"), root)
            rows = pd.read_parquet(export_split(tier, store, export, "none", tokenizer, root))
            rows["data_source"] = split.name  # verl's validation reports per data_source: per split
            rows.to_parquet(out[split.name])
    build_demonstrations(tier, tokenizer, root)
    return out


def export_split(tier: Tier, store: Path, export: Path, mixing: str, tokenizer: Path, root: Path) -> Path:
    run(py("-m", "env_registry", "--store", str(store), "-q", "export-parquet", "--out", str(export),
           "--mixing", mixing, "--val-fraction", "0", "--tokenizer", str(tokenizer),
           "--max-prompt-length", str(tier.max_prompt_length)), root)  # fmt: skip
    return export / f"mix_{mixing}" / "train.parquet"


def demonstrations_file(tier: Tier, root: Path) -> Path:
    """`data/sft.parquet` for the plain demonstrations (the name older run folders have), else a name
    that carries the mixing and the no-tool share."""
    if (tier.sft_mixing, tier.no_tool_share) == ("none", 0.0):
        return root / "data" / "sft.parquet"
    return root / "data" / f"sft-mix_{tier.sft_mixing}-notool_{tier.no_tool_share:g}.parquet"


def build_demonstrations(tier: Tier, tokenizer: Path, root: Path) -> Path:
    """The golden demonstrations of the train split (`env_registry export-sft`), from its export with
    the tier's mixing, with the tier's recovery share and no-tool share."""
    path = demonstrations_file(tier, root)
    if path.exists():
        return path
    train = root / "data" / "train"
    rl = train / "rl" / f"mix_{tier.sft_mixing}" / "train.parquet"
    if not rl.exists():
        export_split(tier, train / "store", train / "rl", tier.sft_mixing, tokenizer, root)
    run(py("-m", "env_registry", "-q", "export-sft", str(rl), "--output-file", str(path),
           "--recovery-share", str(tier.recovery_share), "--no-tool-share", str(tier.no_tool_share)), root)  # fmt: skip
    return path


def evaluate(
    tier: Tier, model: Path, data: dict[str, Path], out: Path, label: str = "base"
) -> tuple[dict, dict, float]:
    """A model on every split, greedy (`eval envs`, the episodes verl's validation runs): per split
    its means, per split the F1 of each environment, and the seconds the evaluations took when they
    ran (a split found finished keeps the time it recorded; NaN if it recorded none)."""
    scores, rows, seconds = {}, {}, 0.0
    out.mkdir(parents=True, exist_ok=True)  # its parent is the evaluations' working directory
    limits = [
        f"data.max_prompt_length={tier.max_prompt_length}",
        f"data.max_response_length={tier.max_response_length}",
    ]
    for split, parquet in data.items():
        run_dir = out / split
        timing = run_dir / "bench.seconds"
        if not (run_dir / "manifest.json").exists():
            t0 = time.perf_counter()
            run(py("-m", "astra_verl.eval", "envs", "--data", str(parquet), "--model-path", str(model),
                   "--out", str(run_dir), "--label", label, "--concurrency", "32",
                   *[a for o in limits for a in ("--set", o)]),
                out.parent, timeout=4 * HOUR)  # fmt: skip
            timing.write_text(f"{time.perf_counter() - t0:.1f}")
        seconds += float(timing.read_text()) if timing.exists() else float("nan")
        records = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines() if line]
        calls = sum(r["calls"] for r in records)
        scores[split] = {
            "f1": sum(r["f1"] for r in records) / len(records),
            "invalid_rate": sum(r["invalid_calls"] for r in records) / calls if calls else 0.0,
            "turns": sum(r["turns"] for r in records) / len(records),
        }
        rows[split] = {r["env_id"]: r["f1"] for r in records}
    return scores, rows, seconds


def demonstrations_for_seed(tier: Tier, seed: int, demos: Path, out: Path) -> Path:
    """The SFT file this seed trains on: `demos` itself, or (`sft_order_by_seed`, seed > 0) its rows
    permuted by the seed, written once to `out/sft.parquet`."""
    if not tier.sft_order_by_seed or seed == 0:
        return demos
    path = out / "sft.parquet"
    if not path.exists():
        rows = pd.read_parquet(demos)
        order = np.random.default_rng(seed).permutation(len(rows))
        rows.iloc[order].reset_index(drop=True).to_parquet(path)
    return path


def sft(tier: Tier, seed: int, model: Path, demos: Path, out: Path) -> tuple[Path, float, int]:
    """verl's SFT trainer on the demonstrations; (HF checkpoint, seconds, steps)."""
    ckpt = out / "sft-ckpt" / f"global_step_{tier.sft_steps}" / "huggingface"
    timing = out / "sft.seconds"
    if ckpt.exists() and timing.exists():
        return ckpt, float(timing.read_text()), tier.sft_steps
    t0 = time.perf_counter()
    run(py("-m", "torch.distributed.run", "--standalone", "--nproc_per_node=1", "-m", "verl.trainer.sft_trainer",
           "+recipe=astra_sft_cpu", f"data.train_files={demos}", f"model.path={model}",
           f"data.max_length={tier.max_prompt_length + tier.max_response_length}",
           f"data.train_batch_size={tier.sft_batch}", f"data.micro_batch_size_per_gpu={tier.sft_batch}",
           f"trainer.total_training_steps={tier.sft_steps}", "trainer.total_epochs=100000", f"optim.lr={tier.sft_lr}",
           "optim.lr_scheduler_type=constant", f"trainer.seed={seed}", f"trainer.default_local_dir={out / 'sft-ckpt'}",
           "trainer.logger=[console,file]"),
        out, env={"VERL_FILE_LOGGER_PATH": str(out / "sft.metrics.jsonl")}, log=out / "sft.log", timeout=8 * HOUR)  # fmt: skip
    seconds = time.perf_counter() - t0
    timing.write_text(f"{seconds:.1f}")
    return ckpt, seconds, tier.sft_steps


def grpo(tier: Tier, seed: int, checkpoint: Path, data: dict[str, Path], out: Path) -> tuple[dict, float]:
    """verl's PPO loop from the SFT checkpoint, validating every split every `test_freq` steps."""
    metrics = out / "grpo.metrics.jsonl"
    timing = out / "grpo.seconds"
    if metrics.exists() and timing.exists():
        return read_metrics(metrics), float(timing.read_text())
    metrics.unlink(missing_ok=True)
    val_files = "[" + ",".join(str(p) for p in data.values()) + "]"
    t0 = time.perf_counter()
    run(py("-m", "verl.trainer.main_ppo", "+recipe=astra_cpu", f"data.train_files={data['train']}",
           f"data.val_files={val_files}", f"actor_rollout_ref.model.path={checkpoint}",
           f"data.max_prompt_length={tier.max_prompt_length}", f"data.max_response_length={tier.max_response_length}",
           f"data.train_batch_size={tier.train_batch}", f"actor_rollout_ref.actor.ppo_mini_batch_size={tier.train_batch}",
           f"actor_rollout_ref.rollout.n={tier.rollout_n}", f"actor_rollout_ref.rollout.temperature={tier.temperature}",
           f"actor_rollout_ref.actor.optim.lr={tier.grpo_lr}", f"trainer.total_training_steps={tier.grpo_steps}",
           "trainer.val_before_train=true", f"trainer.test_freq={tier.test_freq}", f"data.seed={seed}",
           f"actor_rollout_ref.actor.data_loader_seed={seed}", f"actor_rollout_ref.rollout.seed={seed}",
           "trainer.logger=[console,file]", f"trainer.rollout_data_dir={out / 'rollouts'}",
           f"trainer.validation_data_dir={out / 'validation'}",
           f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={metrics}", *tier.extra_grpo),
        out, log=out / "grpo.log", timeout=12 * HOUR)  # fmt: skip
    seconds = time.perf_counter() - t0
    timing.write_text(f"{seconds:.1f}")
    return read_metrics(metrics), seconds


# -- measurements -------------------------------------------------------------------------------

COLUMNS = ("train_greedy", "train_T", "heldout_data", "heldout_shape", "invalid_rate", "turns")
LABELS = {
    "train_greedy": "train reward (greedy)",
    "train_T": "train reward (T, all groups, last window)",
    "heldout_data": "held-out data F1",
    "heldout_shape": "held-out shape F1",
    "invalid_rate": "invalid-call rate (train)",
    "turns": "turns (train)",
}


def curve(steps: dict[int, dict[str, float]]) -> dict[int, dict[str, float]]:
    """Per validated step: the columns. verl validates before training (step 0: after SFT) and after the
    update of every `test_freq`-th step. `train_T` at step s is the mean of `astra/reward_all_groups/mean`
    over the steps since the previous validation (every rollout sampled there at the rollout temperature,
    none dropped: the policy's own reward, on the train environments)."""
    out: dict[int, dict[str, float]] = {}
    previous = 0
    for step, m in sorted(steps.items()):
        if "val-core/train/reward/mean@1" not in m:
            continue
        calls = m.get("val-aux/train/calls/mean@1", 0.0)
        row = {
            "train_greedy": m["val-core/train/reward/mean@1"],
            "heldout_data": m.get("val-aux/heldout_data/f1/mean@1", m.get("val-core/heldout_data/reward/mean@1")),
            "heldout_shape": m.get("val-aux/heldout_shape/f1/mean@1", m.get("val-core/heldout_shape/reward/mean@1")),
            "invalid_rate": m.get("val-aux/train/invalid_calls/mean@1", 0.0) / calls if calls else 0.0,
            "turns": m.get("val-aux/train/turns/mean@1", float("nan")),
        }
        window = [steps[s]["astra/reward_all_groups/mean"] for s in range(previous + 1, step + 1) if s in steps]
        if step > 0 and window:
            row["train_T"] = sum(window) / len(window)
        out[step] = row
        previous = step
    return out


def row_of(scores: dict[str, dict[str, float]]) -> dict[str, float]:
    """The table's columns from `evaluate`'s per-split means."""
    return {
        "train_greedy": scores["train"]["f1"],
        "heldout_data": scores["heldout_data"]["f1"],
        "heldout_shape": scores["heldout_shape"]["f1"],
        "invalid_rate": scores["train"]["invalid_rate"],
        "turns": scores["train"]["turns"],
    }


def median(values: Sequence[float]) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


STEP_RATE = re.compile(r"^Epoch \d+/\d+:.*?(\d+(?:\.\d+)?)(s/it|it/s)\]", re.MULTILINE)


def sft_step_seconds(log: Path) -> float:
    """Median seconds per SFT step, from the trainer's progress bar (start-up and saving excluded)."""
    rates = [float(v) if unit == "s/it" else 1 / float(v) for v, unit in STEP_RATE.findall(log.read_text())]
    return median(rates)


def grpo_step_seconds(steps: dict[int, dict[str, float]]) -> float:
    """Median `timing_s/step` (verl's own timer: generation, rewards, update, weight sync; validation apart)."""
    return median([m["timing_s/step"] for s, m in steps.items() if s > 1 and "timing_s/step" in m])


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return float("nan"), float("nan")
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, float("nan")
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))


@dataclass
class SeedRun:
    seed: int
    base: dict[str, float]
    steps: dict[int, dict[str, float]]
    seconds: dict[str, float]
    sft_loss: tuple[float, float]
    # "base" or a validated step -> split -> env id -> F1 (greedy), for paired SEs over environments
    rows: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)


def split_of_envs(data: dict[str, Path]) -> dict[str, str]:
    """env id -> split, from each split's parquet (verl's validation dump names the environment
    in `gts` but does not carry the row's `data_source`)."""
    out: dict[str, str] = {}
    for path in data.values():
        for row in pd.read_parquet(path, columns=["data_source", "reward_model"]).itertuples():
            out[json.loads(row.reward_model["ground_truth"])["env_id"]] = row.data_source
    return out


def validation_rows(folder: Path, split_of: dict[str, str]) -> dict[str, dict[str, dict[str, float]]]:
    """verl's validation dumps (`trainer.validation_data_dir`, `<step>.jsonl`): step -> split -> env -> F1."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for path in sorted(folder.glob("*.jsonl")) if folder.exists() else []:
        by_split: dict[str, dict[str, float]] = {}
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                env = json.loads(r["gts"])["env_id"]
                by_split.setdefault(split_of[env], {})[env] = r["f1"]
        out[path.stem] = by_split
    return out


def row_rise(run_: SeedRun, split: str, start: str, end: str) -> tuple[float, float, int]:
    """Mean and SE over the split's environments of F1(end) - F1(start), paired by environment."""
    a, b = run_.rows.get(start, {}).get(split, {}), run_.rows.get(end, {}).get(split, {})
    diffs = [b[e] - a[e] for e in a if e in b]
    mean, se = mean_se(diffs)
    return mean, se, len(diffs)


def aggregate(runs: Sequence[SeedRun]) -> dict[str, dict[str, tuple[float, float]]]:
    """{"base" | "step N": {column: (mean, SE over seeds)}} for steps every seed validated."""
    steps = sorted(set.intersection(*(set(r.steps) for r in runs)))
    table = {"base": {c: mean_se([r.base.get(c, float("nan")) for r in runs]) for c in COLUMNS}}
    for s in steps:
        table[f"step {s}"] = {c: mean_se([r.steps[s].get(c, float("nan")) for r in runs]) for c in COLUMNS}
    return table


def rise(runs: Sequence[SeedRun], column: str, start: str, end: str) -> tuple[float, float]:
    """Mean and SE over seeds of column(end) - column(start) ("base" or a step number)."""

    def value(r: SeedRun, at: str) -> float:
        return r.base[column] if at == "base" else r.steps[int(at)][column]

    return mean_se([value(r, end) - value(r, start) for r in runs])


# -- reporting ----------------------------------------------------------------------------------


def machine() -> str:
    try:
        model = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
    except (OSError, StopIteration):
        model = platform.processor() or "unknown CPU"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{platform.node()}: {os.cpu_count()} CPUs ({model}), load average {load}, Python {platform.python_version()}"
    )


def fmt(cell: tuple[float, float], spec: str = ".3f") -> str:
    mean, se = cell
    if math.isnan(mean):
        return "n/a"
    return format(mean, spec) + ("" if math.isnan(se) else f" ± {format(se, spec)}")


def verdicts(tier: Tier, runs: Sequence[SeedRun]) -> list[str]:
    validated = set.intersection(*(set(r.steps) for r in runs))
    last = str(max(validated))
    lines = []

    def verdict(what: str, column: str, start: str, end: str, target: float = 0.0) -> None:
        split = {"train_greedy": "train"}.get(column, column)
        if column == "train_T" and start == end:  # a window compared with itself says nothing
            lines.append(f"- {what}: n/a (one sampled window: needs --grpo-steps beyond --test-freq)")
            return
        if len(runs) >= 2 or column == "train_T":
            mean, se = rise(runs, column, start, end)
            over = f"{len(runs)} seeds"
        else:  # one seed: the SE over environments, paired (each environment before and after)
            mean, se, n = row_rise(runs[0], split, start, end)
            over = f"{n} {split} environments, seed {runs[0].seed}"
        if math.isnan(mean):
            lines.append(f"- {what}: n/a (nothing measured at both points over {over})")
            return
        if math.isnan(se):  # nothing to judge against: say why instead of printing "± nan: MISSED"
            lines.append(f"- {what}: {mean:+.3f}, n/a (no standard error over {over}: needs 2 or more)")
            return
        ok = mean > 2 * se and mean >= target
        want = f">= {target} and " if target else ""
        lines.append(f"- {what}: {mean:+.3f} ± {se:.3f} over {over} (target {want}> 2 SE): {'met' if ok else 'MISSED'}")

    sft_target = 0.3 if tier.model != "tiny" else 0.0
    if validated == {0}:  # --grpo-steps 0: SFT only, nothing of GRPO to judge
        verdict("SFT, held-out data F1, base -> after SFT", "heldout_data", "base", "0", sft_target)
        verdict("SFT, held-out shape F1, base -> after SFT", "heldout_shape", "base", "0")
        return lines
    first = str(min(s for s in validated if s > 0))
    verdict(f"GRPO, train reward (greedy), step 0 -> {last}", "train_greedy", "0", last)
    verdict(f"GRPO, train reward (T), steps 1-{first} -> the {tier.test_freq} before {last}", "train_T", first, last)
    verdict("SFT, held-out data F1, base -> step 0", "heldout_data", "base", "0", sft_target)
    verdict(f"GRPO, held-out data F1, step 0 -> {last}", "heldout_data", "0", last)
    verdict("SFT, held-out shape F1, base -> step 0", "heldout_shape", "base", "0")
    return lines


def stage_times(tier: Tier, runs: Sequence[SeedRun]) -> list[str]:
    """Each stage's seconds per seed (mean ± SE), the stages this run had."""

    def seconds(key: str, spec: str = ".0f") -> str:
        return fmt(mean_se([r.seconds[key] for r in runs]), spec)

    parts = [f"SFT {seconds('sft')} s (median {seconds('sft_step', '.2f')} s/step)"]
    if tier.grpo_steps:
        parts.append(
            f"GRPO {seconds('grpo')} s (median {seconds('grpo_step', '.2f')} s/step; start-up and validations on top)"
        )
    parts.append(f"base-model evaluation {seconds('base_eval')} s")
    if not tier.grpo_steps:
        parts.append(f"SFT-checkpoint evaluation {seconds('sft_eval')} s")
    return parts


def write_report(tier: Tier, runs: Sequence[SeedRun], out: Path, wall_s: float, argv: Sequence[str]) -> Path:
    table = aggregate(runs)
    lines = [
        f"# Learning benchmark, tier `{tier.name}` ({tier.model} model), {len(runs)} seeds",
        "",
        f"`{' '.join(['.venv/bin/python', 'bench/learning.py', *argv])}`",
        "",
        "| after | " + " | ".join(LABELS[c] for c in COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]
    for name, cells in table.items():
        after_sft = "SFT (GRPO step 0)" if tier.grpo_steps else "SFT (eval envs, greedy)"
        label = {"base": "base model", "step 0": after_sft}.get(name, f"GRPO {name}")
        lines.append(f"| {label} | " + " | ".join(fmt(cells[c]) for c in COLUMNS) + " |")
    lines += ["", "Mean ± standard error over seeds " + ", ".join(str(r.seed) for r in runs) + "."]
    lines += ["", "## Verdicts", "", *verdicts(tier, runs)]
    lines += [
        "",
        "## Settings, machine, time",
        "",
        "- splits: "
        + "; ".join(f"{s.name} {s.envs} envs (seed {s.seed}, {', '.join(s.scenario_types)})" for s in tier.splits),
        f"- SFT: {tier.sft_steps} steps, lr {tier.sft_lr}, batch {tier.sft_batch}, recovery share {tier.recovery_share}; "
        f"loss {sum(r.sft_loss[0] for r in runs) / len(runs):.2f} -> {sum(r.sft_loss[1] for r in runs) / len(runs):.3f}",
        (
            f"- GRPO: {tier.grpo_steps} steps, lr {tier.grpo_lr}, temperature {tier.temperature}, batch "
            f"{tier.train_batch} prompts x n={tier.rollout_n}, validation every {tier.test_freq} steps (greedy)"
            if tier.grpo_steps
            else "- GRPO: not run (--grpo-steps 0); the SFT checkpoint scored by `python -m astra_verl.eval envs`, "
            "greedy, on every split"
        ),
        f"- {machine()}",
        f"- wall time of this invocation {wall_s / 60:.1f} min (a stage found finished in the run folder is "
        "reused, not rerun; the stage times are those recorded when each stage ran)",
        "- per seed: " + ", ".join(stage_times(tier, runs)),
    ]
    path = out / "learning.md"
    path.write_text("\n".join(lines) + "\n")
    (out / "learning.json").write_text(
        json.dumps({"tier": asdict(tier), "runs": [asdict(r) for r in runs], "wall_s": wall_s}, indent=1)
    )
    plot(tier, runs, table, out / "learning.png")
    return path


def plot(tier: Tier, runs: Sequence[SeedRun], table: dict, path: Path) -> None:
    steps = [int(k.split()[1]) for k in table if k != "base"]
    panels = (("train_greedy", "train_T"), ("heldout_data", "heldout_shape"), ("invalid_rate",), ("turns",))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6))
    for ax, columns in zip(axes, panels, strict=True):
        for c in columns:
            mean = [table[f"step {s}"][c][0] for s in steps]
            se = [table[f"step {s}"][c][1] for s in steps]
            line = ax.plot(steps, mean, marker="o", label=LABELS[c])[0]
            lo = [m - (e if not math.isnan(e) else 0) for m, e in zip(mean, se, strict=True)]
            hi = [m + (e if not math.isnan(e) else 0) for m, e in zip(mean, se, strict=True)]
            ax.fill_between(steps, lo, hi, alpha=0.2, color=line.get_color())
            base = table["base"][c][0]
            if not math.isnan(base):
                ax.scatter([-tier.test_freq / 2], [base], marker="x", color=line.get_color())
        ax.set_xlabel("GRPO step (x: base model, 0: after SFT)")
        ax.legend(fontsize=7)
        if columns[0] != "turns":
            ax.set_ylim(0, 1)
    fig.suptitle(f"learning benchmark, tier {tier.name} ({tier.model}), mean ± SE over {len(runs)} seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- main -------------------------------------------------------------------------------------------


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
