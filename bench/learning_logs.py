"""What bench/learning.py reads back from verl's logs: the validation curve out of the logged
metrics (`curve`), the per-environment F1 of verl's validation dumps (`validation_rows`), and the
seconds per SFT and GRPO step (`sft_step_seconds`, `grpo_step_seconds`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

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
