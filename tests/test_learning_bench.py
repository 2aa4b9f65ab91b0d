"""bench/learning.py's measurements (pure parts): validation curves out of verl's logged metrics,
the all-groups reward windows, mean ± SE over seeds and the verdicts."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest
from testkit import REPO

sys.path.insert(0, str(REPO / "bench"))  # the bench's modules import their siblings; only for this import
try:
    import learning_logs
    import learning_report
    import learning_stages
    import learning_stats
finally:
    sys.path.remove(str(REPO / "bench"))


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
    curve = learning_logs.curve(metrics(0.5, 0.7, [0.2, 0.4, 0.6, 0.8]))
    assert sorted(curve) == [0, 4]
    assert curve[0]["train_greedy"] == 0.5 and "train_T" not in curve[0]
    assert curve[4]["train_T"] == pytest.approx(0.5)  # steps 1-4, before batch filling
    assert curve[4]["invalid_rate"] == pytest.approx(0.25) and curve[4]["heldout_data"] == 0.2
    assert learning_logs.grpo_step_seconds(metrics(0.5, 0.7, [0.2] * 4)) == pytest.approx(
        5.0
    )  # median of steps 2-4 (step 1 warms up)


def test_rises_over_seeds_and_their_verdicts(tmp_path):
    base = {"train_greedy": 0.0, "heldout_data": 0.0, "heldout_shape": 0.0, "invalid_rate": 0.0, "turns": 1.0}
    runs = [
        learning_stats.SeedRun(
            seed, base, learning_logs.curve(metrics(0.5, 0.5 + d, [0.3, 0.4, 0.5, 0.6])), {}, (7.0, 0.1)
        )
        for seed, d in enumerate((0.2, 0.3, 0.25))
    ]
    mean, se = learning_stats.rise(runs, "train_greedy", "0", "4")
    assert mean == pytest.approx(0.25) and se == pytest.approx(0.0289, abs=1e-3)
    table = learning_stats.aggregate(runs)
    assert list(table) == ["base", "step 0", "step 4"] and table["step 4"]["train_greedy"][0] == pytest.approx(0.75)
    lines = learning_report.verdicts(learning_stages.QUICK, runs)
    assert lines[0].startswith("- GRPO, train reward (greedy), step 0 -> 4: +0.250") and lines[0].endswith("met")
    flat = [
        learning_stats.SeedRun(s, base, learning_logs.curve(metrics(0.5, 0.5, [0.3] * 4)), {}, (7.0, 0.1))
        for s in range(3)
    ]
    assert learning_report.verdicts(learning_stages.QUICK, flat)[0].endswith("MISSED")


def test_sft_step_time_comes_from_the_trainers_progress_bar(tmp_path):
    log = tmp_path / "sft.log"
    log.write_text(
        "Epoch 1/100:  40%|####  | 2/5 [00:04<00:06,  2.00s/it]\n"
        "Epoch 1/100:  60%|######  | 3/5 [00:07<00:04,  3.00s/it]\n"
        "Writing model shards: 100%|##| 1/1 [00:00<00:00, 45.91it/s]\n"
        "Epoch 2/100:  80%|########  | 4/5 [00:08<00:01,  2.50it/s]\n"
    )
    assert learning_logs.sft_step_seconds(log) == pytest.approx(2.0)  # 2.0, 3.0, 0.4 s: shard writing ignored


def test_one_seed_is_judged_over_environments_paired(tmp_path):
    dump = tmp_path / "validation"
    dump.mkdir()
    for step, f1s in (("0", (0.0, 0.5, 0.5, 1.0)), ("4", (0.5, 1.0, 0.5, 1.0))):
        lines = [
            {"gts": f'{{"env_id": "e{i}"}}', "f1": f, "score": f}  # verl's dump has no data_source
            for i, f in enumerate(f1s)
        ]
        (dump / f"{step}.jsonl").write_text("\n".join(__import__("json").dumps(x) for x in lines))
    rows = learning_logs.validation_rows(dump, {f"e{i}": "heldout_data" for i in range(4)})
    assert rows["4"]["heldout_data"] == {"e0": 0.5, "e1": 1.0, "e2": 0.5, "e3": 1.0}
    base = {"train_greedy": 0.0, "heldout_data": 0.0, "heldout_shape": 0.0, "invalid_rate": 0.0, "turns": 1.0}
    run_ = learning_stats.SeedRun(0, base, learning_logs.curve(metrics(0.5, 0.7, [0.3] * 4)), {}, (7.0, 0.1), rows)
    mean, se, n = learning_stats.row_rise(run_, "heldout_data", "0", "4")
    assert (mean, n) == (0.25, 4) and se == pytest.approx(0.1443, abs=1e-3)
    lines = learning_report.verdicts(learning_stages.QUICK, [run_])
    assert "over 4 heldout_data environments, seed 0" in lines[3] and lines[3].endswith("MISSED")  # 0.25 < 2 x 0.144
    # the sampled reward of one seed has no SE to judge by: said, not printed as "± nan: MISSED"
    assert lines[1].endswith("n/a (one sampled window: needs --grpo-steps beyond --test-freq)"), lines[1]
    # no held-out-shape rows in this dump: said, not printed as "nan ± nan: MISSED"
    assert (
        lines[4]
        == "- SFT, held-out shape F1, base -> step 0: n/a (nothing measured at both points over 0 heldout_shape environments, seed 0)"
    )
    two_windows = {**metrics(0.5, 0.7, [0.3] * 4), 8: {"astra/reward_all_groups/mean": 0.4, **val(0.8, 0.2)}}
    run_ = learning_stats.SeedRun(0, base, learning_logs.curve(two_windows), {}, (7.0, 0.1), rows)
    line = learning_report.verdicts(learning_stages.QUICK, [run_])[
        1
    ]  # the sampled reward of one seed has no SE to judge by
    assert line.endswith(": +0.100, n/a (no standard error over 1 seeds: needs 2 or more)"), line


def test_a_one_step_run_says_its_sampled_window_cannot_be_judged():
    base = {"train_greedy": 0.0, "heldout_data": 0.0, "heldout_shape": 0.0, "invalid_rate": 0.0, "turns": 1.0}
    one_step = {0: val(0.5, 0.1), 1: {"astra/reward_all_groups/mean": 0.3, "timing_s/step": 3.0, **val(0.6, 0.1)}}
    runs = [learning_stats.SeedRun(s, base, learning_logs.curve(one_step), {}, (7.0, 0.1)) for s in range(3)]
    line = learning_report.verdicts(learning_stages.QUICK, runs)[1]
    assert line.endswith("n/a (one sampled window: needs --grpo-steps beyond --test-freq)"), line


def test_a_pretrained_tiers_seeds_train_on_differently_ordered_demonstrations(tmp_path):
    """verl's SFT sampler ignores trainer.seed: without this every real-tier seed trained one checkpoint."""
    import pandas as pd

    demos = tmp_path / "sft.parquet"
    pd.DataFrame({"messages": [f"row {i}" for i in range(12)]}).to_parquet(demos)
    assert learning_stages.demonstrations_for_seed(learning_stages.REAL, 0, demos, tmp_path / "s0") == demos
    assert learning_stages.demonstrations_for_seed(learning_stages.QUICK, 1, demos, tmp_path / "q1") == demos
    orders = []
    for seed in (1, 2):
        (tmp_path / f"s{seed}").mkdir()
        path = learning_stages.demonstrations_for_seed(learning_stages.REAL, seed, demos, tmp_path / f"s{seed}")
        orders.append(list(pd.read_parquet(path)["messages"]))
    assert all(sorted(o) == sorted(f"row {i}" for i in range(12)) for o in orders)  # same rows
    assert orders[0] != orders[1] and [f"row {i}" for i in range(12)] not in orders


def test_an_sft_only_run_is_judged_on_sft_alone(tmp_path):
    """--grpo-steps 0: step 0 is the SFT checkpoint scored by eval envs; only SFT's verdicts, over seeds."""
    base = {"train_greedy": 0.0, "heldout_data": 0.0, "heldout_shape": 0.0, "invalid_rate": 0.0, "turns": 1.0}
    scores = [
        {
            "train": {"f1": 0.8, "invalid_rate": 0.1, "turns": 3.0},
            "heldout_data": {"f1": h},
            "heldout_shape": {"f1": 0.2},
        }
        for h in (0.2, 0.3)
    ]
    runs = [
        learning_stats.SeedRun(s, base, {0: learning_logs.row_of(sc)}, {}, (1.0, 0.01)) for s, sc in enumerate(scores)
    ]
    lines = learning_report.verdicts(learning_stages.REAL, runs)
    assert len(lines) == 2, lines
    assert (
        lines[0]
        == "- SFT, held-out data F1, base -> after SFT: +0.250 ± 0.050 over 2 seeds (target >= 0.3 and > 2 SE): MISSED"
    )
    assert lines[1].startswith("- SFT, held-out shape F1, base -> after SFT: +0.200 ± 0.000 over 2 seeds")
    tier = replace(learning_stages.REAL, grpo_steps=0, seeds=(0, 1))
    for r in runs:
        r.seconds.update(sft=100.0, sft_step=10.0, grpo=0.0, grpo_step=float("nan"), base_eval=5.0, sft_eval=7.0)
    report = learning_report.write_report(
        tier, runs, tmp_path, 60.0, ["--tier", "real", "--grpo-steps", "0"]
    ).read_text()
    assert "| SFT (eval envs, greedy) | 0.800 ± 0.000 |" in report, report
    assert "GRPO: not run (--grpo-steps 0)" in report and "SFT-checkpoint evaluation 7 ± 0 s" in report
    assert "GRPO 0" not in report and "s/step), base-model evaluation 5 ± 0 s" in report, report
    assert (tmp_path / "learning.png").exists()
