"""bench/learning.py's measurements (pure parts): validation curves out of verl's logged metrics,
the all-groups reward windows, mean ± SE over seeds and the verdicts."""

from __future__ import annotations

import importlib.util
import sys

import pytest
from testkit import REPO

spec = importlib.util.spec_from_file_location("learning_bench", REPO / "bench" / "learning.py")
learning = importlib.util.module_from_spec(spec)
sys.modules["learning_bench"] = learning  # dataclasses look their module up while the class is built
spec.loader.exec_module(learning)


def val(step_reward: float, heldout: float, calls: float = 2.0, invalid: float = 1.0) -> dict[str, float]:
    return {
        "val-core/train/reward/mean@1": step_reward,
        "val-aux/heldout_data/f1/mean@1": heldout,
        "val-aux/heldout_shape/f1/mean@1": 0.0,
        "val-aux/train/calls/mean@1": calls,
        "val-aux/train/invalid_calls/mean@1": invalid,
        "val-aux/train/turns/mean@1": 3.0,
    }


def metrics(start: float, end: float, sampled: list[float]) -> dict[int, dict[str, float]]:
    """verl's file-logger steps: validation at 0 (before training) and 4, training reward at 1-4."""
    steps = {0: val(start, 0.1)}
    for s, r in enumerate(sampled, start=1):
        steps[s] = {"astra/reward_all_groups/mean": r, "critic/score/mean": 0.5, "timing_s/step": 2.0 + s}
    steps[4].update(val(end, 0.2, invalid=0.5))
    return steps


def test_the_curve_reads_each_validation_and_the_sampled_reward_since_the_last_one():
    curve = learning.curve(metrics(0.5, 0.7, [0.2, 0.4, 0.6, 0.8]))
    assert sorted(curve) == [0, 4]
    assert curve[0]["train_greedy"] == 0.5 and "train_T" not in curve[0]
    assert curve[4]["train_T"] == pytest.approx(0.5)  # steps 1-4, before batch filling
    assert curve[4]["invalid_rate"] == pytest.approx(0.25) and curve[4]["heldout_data"] == 0.2
    assert learning.grpo_step_seconds(metrics(0.5, 0.7, [0.2] * 4)) == pytest.approx(
        5.0
    )  # median of steps 2-4 (step 1 warms up)


def test_rises_over_seeds_and_their_verdicts(tmp_path):
    base = {"train_greedy": 0.0, "heldout_data": 0.0, "heldout_shape": 0.0, "invalid_rate": 0.0, "turns": 1.0}
    runs = [
        learning.SeedRun(seed, base, learning.curve(metrics(0.5, 0.5 + d, [0.3, 0.4, 0.5, 0.6])), {}, (7.0, 0.1))
        for seed, d in enumerate((0.2, 0.3, 0.25))
    ]
    mean, se = learning.rise(runs, "train_greedy", "0", "4")
    assert mean == pytest.approx(0.25) and se == pytest.approx(0.0289, abs=1e-3)
    table = learning.aggregate(runs)
    assert list(table) == ["base", "step 0", "step 4"] and table["step 4"]["train_greedy"][0] == pytest.approx(0.75)
    lines = learning.verdicts(learning.QUICK, runs)
    assert lines[0].startswith("- GRPO, train reward (greedy), step 0 -> 4: +0.250") and lines[0].endswith("met")
    flat = [learning.SeedRun(s, base, learning.curve(metrics(0.5, 0.5, [0.3] * 4)), {}, (7.0, 0.1)) for s in range(3)]
    assert learning.verdicts(learning.QUICK, flat)[0].endswith("MISSED")


def test_sft_step_time_comes_from_the_trainers_progress_bar(tmp_path):
    log = tmp_path / "sft.log"
    log.write_text(
        "Epoch 1/100:  40%|####  | 2/5 [00:04<00:06,  2.00s/it]\n"
        "Epoch 1/100:  60%|######  | 3/5 [00:07<00:04,  3.00s/it]\n"
        "Writing model shards: 100%|##| 1/1 [00:00<00:00, 45.91it/s]\n"
        "Epoch 2/100:  80%|########  | 4/5 [00:08<00:01,  2.50it/s]\n"
    )
    assert learning.sft_step_seconds(log) == pytest.approx(2.0)  # 2.0, 3.0, 0.4 s: shard writing ignored


def test_one_seed_is_judged_over_environments_paired(tmp_path):
    dump = tmp_path / "validation"
    dump.mkdir()
    for step, f1s in (("0", (0.0, 0.5, 0.5, 1.0)), ("4", (0.5, 1.0, 0.5, 1.0))):
        lines = [
            {"gts": f'{{"env_id": "e{i}"}}', "f1": f, "score": f}  # verl's dump has no data_source
            for i, f in enumerate(f1s)
        ]
        (dump / f"{step}.jsonl").write_text("\n".join(__import__("json").dumps(x) for x in lines))
    rows = learning.validation_rows(dump, {f"e{i}": "heldout_data" for i in range(4)})
    assert rows["4"]["heldout_data"] == {"e0": 0.5, "e1": 1.0, "e2": 0.5, "e3": 1.0}
    base = {"train_greedy": 0.0, "heldout_data": 0.0, "heldout_shape": 0.0, "invalid_rate": 0.0, "turns": 1.0}
    run_ = learning.SeedRun(0, base, learning.curve(metrics(0.5, 0.7, [0.3] * 4)), {}, (7.0, 0.1), rows)
    mean, se, n = learning.row_rise(run_, "heldout_data", "0", "4")
    assert (mean, n) == (0.25, 4) and se == pytest.approx(0.1443, abs=1e-3)
    line = learning.verdicts(learning.QUICK, [run_])[3]
    assert "over 4 heldout_data environments, seed 0" in line and line.endswith("MISSED")  # 0.25 < 2 x 0.144
