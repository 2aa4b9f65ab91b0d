"""The stages of bench/learning.py, each the command a user runs, in a fresh process (see
bench/learning.py's docstring for the order): the base model, the data (three splits and the golden
demonstrations), `eval envs` on every split, verl's SFT trainer, verl's PPO loop. Each stage reuses
what a finished run left in its folder. `Tier` sizes them (`QUICK`, `REAL`); bench/transfer.py
trains its SFT checkpoints through these stages too.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from astra_verl.demo import read_metrics, run

HOUR = 3600.0
ANSWERABLE = "answerable=1"  # env_registry generate --variants (`VariantShares.parse`): answerable only
# Every variant but `answerable`, in equal shares: added to the answerable demonstrations in a 40:60
# ratio (16 to 24 on the real tier), the recommended mix (env_registry.variants.MIX) is 0.4 of them.
OTHER_HALF = "unanswerable=0.25,missing_value=0.25,missing_function=0.25,no_tool=0.25"


@dataclass(frozen=True)
class Split:
    name: str
    envs: int
    seed: int  # generator seed: another seed draws other worlds
    scenario_types: tuple[str, ...]
    variants: str = ANSWERABLE  # env_registry generate --variants: which variants, in what shares


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
    # the other half of tool use (issue 49): the golden demonstrations of `variant_envs` more
    # environments (worlds of `VARIANT_SEED`), of the variants in `variant_mix`'s shares (default
    # `OTHER_HALF`; `ANSWERABLE`: bench/transfer.py's control, more worlds without the other half),
    # added to the train split's
    variant_envs: int = 0
    variant_mix: str = OTHER_HALF
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
VARIANT_SEED = 100  # the variant demonstrations' worlds: no seed of a split
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
    for split in tier.splits:
        if out[split.name].exists():
            continue
        shutil.rmtree(data / split.name, ignore_errors=True)  # a split whose build was cut off
        rows = pd.read_parquet(build_split(tier, split, data / split.name, tokenizer, root))
        rows["data_source"] = split.name  # verl's validation reports per data_source: per split
        rows.to_parquet(out[split.name])
    build_demonstrations(tier, tokenizer, root)
    return out


def build_split(tier: Tier, split: Split, folder: Path, tokenizer: Path, root: Path) -> Path:
    """A split's store (generated, validated) and its RL export; the export's train.parquet."""
    store = folder / "store"
    run(py("-m", "env_registry", "--store", str(store), "-q", "generate", "--n", str(split.envs),
           "--seed", str(split.seed), "--max-hops", str(tier.max_hops), "--variants", split.variants,
           "--scenario-types", ",".join(split.scenario_types)), root)  # fmt: skip
    run(py("-m", "env_registry", "--store", str(store), "-q", "validate"), root)
    return export_split(tier, store, folder / "rl", "none", tokenizer, root)


def export_split(tier: Tier, store: Path, export: Path, mixing: str, tokenizer: Path, root: Path) -> Path:
    run(py("-m", "env_registry", "--store", str(store), "-q", "export-parquet", "--out", str(export),
           "--mixing", mixing, "--val-fraction", "0", "--tokenizer", str(tokenizer),
           "--max-prompt-length", str(tier.max_prompt_length)), root)  # fmt: skip
    return export / f"mix_{mixing}" / "train.parquet"


def demonstrations_file(tier: Tier, root: Path) -> Path:
    """`data/sft.parquet` for the plain demonstrations (the name older run folders have), else a name
    that carries the mixing and the no-tool share."""
    if (tier.sft_mixing, tier.no_tool_share, tier.variant_envs) == ("none", 0.0, 0):
        return root / "data" / "sft.parquet"
    variants = f"-{mix_tag(tier.variant_mix)}_{tier.variant_envs}" if tier.variant_envs else ""
    return root / "data" / f"sft-mix_{tier.sft_mixing}-notool_{tier.no_tool_share:g}{variants}.parquet"


def mix_tag(mix: str) -> str:
    """A file-name word for the extra demonstrations' `variant_mix`: `variants` for `OTHER_HALF` (the
    name older run folders have), else the mix's own words (`ANSWERABLE`: `answerable_1`)."""
    return "variants" if mix == OTHER_HALF else re.sub(r"[^a-z0-9.]+", "_", mix.lower()).strip("_")


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
    # with variants, the answerable part goes to a file of its own first: `path` appears complete or not at all
    answerable = path.with_suffix(".answerable.parquet") if tier.variant_envs else path
    run(py("-m", "env_registry", "-q", "export-sft", str(rl), "--output-file", str(answerable),
           "--recovery-share", str(tier.recovery_share), "--no-tool-share", str(tier.no_tool_share)), root)  # fmt: skip
    if tier.variant_envs:
        other = variant_demonstrations(tier, tokenizer, root)
        pd.concat([pd.read_parquet(answerable), pd.read_parquet(other)], ignore_index=True).to_parquet(path)
    return path


def variant_split(tier: Tier) -> Split:
    """The `tier.variant_envs` extra environments: the train split's shapes, worlds of `VARIANT_SEED`,
    the variants of `tier.variant_mix`; a folder name of their own per mix."""
    name = f"train_{mix_tag(tier.variant_mix)}_{tier.variant_envs}"
    return Split(name, tier.variant_envs, VARIANT_SEED, SHAPES_SEEN, tier.variant_mix)


def variant_demonstrations(tier: Tier, tokenizer: Path, root: Path) -> Path:
    """The golden demonstrations of `variant_split(tier)`: with `OTHER_HALF`, asking the user for a
    missing value, declaring a missing capability, answering without a tool; with `ANSWERABLE`, calls
    and answers only (the control)."""
    split = variant_split(tier)
    folder = root / "data" / split.name
    shutil.rmtree(folder, ignore_errors=True)
    rl = build_split(tier, split, folder, tokenizer, root)
    out = folder / "sft.parquet"
    run(py("-m", "env_registry", "-q", "export-sft", str(rl), "--output-file", str(out)), root)
    return out


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
