"""bench/demo_rise.py's pure parts: the rise summary over seeds and the count of GRPO steps that
moved the policy (a step with equal rewards in every group has a zero gradient)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
try:
    import demo_rise
finally:
    sys.path.remove(str(BENCH))


def test_learning_steps_counts_steps_with_a_nonzero_gradient(tmp_path):
    path = tmp_path / "grpo.metrics.jsonl"
    records = [
        {"step": 0, "data": {"val-core/astra/reward/mean@1": 0.4}},  # validation only: not a step
        {"step": 1, "data": {"actor/grad_norm": 0.48}},
        {"step": 2, "data": {"actor/grad_norm": 0.0}},
        {"step": 3, "data": {"actor/grad_norm": 1.3}},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert demo_rise.learning_steps(path) == (2, 3)
    assert demo_rise.learning_steps(tmp_path / "absent.jsonl") is None
    assert demo_rise.steps_text((2, 3)) == "2 of 3" and demo_rise.steps_text(None) == "?"


def test_the_summary_counts_positive_rises_and_the_se_over_seeds():
    mean, se, positive = demo_rise.summarize([0.1, 0.3, 0.0])
    assert math.isclose(mean, 0.4 / 3) and positive == 2
    assert math.isclose(se, math.sqrt(((0.1 - mean) ** 2 + (0.3 - mean) ** 2 + mean**2) / 2 / 3))


def test_a_seed_is_reused_only_with_the_demo_settings_it_ran_with(tmp_path):
    row = {"seed": 3, "after_sft": 0.2, "after_grpo": 0.4, "rise": 0.2, "paired_se": 0.1, "envs": 9, "wall_s": 1.0}
    settings = demo_rise.demo_settings(["--sft-steps", "150"])
    assert settings["sft_steps"] == 150 and settings["grpo_steps"] == 32 and "out" not in settings
    (tmp_path / "seed3.json").write_text(json.dumps({**row, "settings": settings}))
    reused = demo_rise.run_seed(3, tmp_path, ["--sft-steps", "150"], stage_timeout=1)
    assert reused["reused"] and reused["rise"] == 0.2
    reused = demo_rise.run_seed(3, tmp_path, [], stage_timeout=1)  # the same settings by default
    assert reused["reused"]
    refused = demo_rise.run_seed(3, tmp_path, ["--sft-steps", "240"], stage_timeout=1)
    assert isinstance(refused, str) and "(sft_steps;" in refused and "another --out" in refused
    (tmp_path / "seed3.json").write_text(json.dumps(row))  # a row from before the settings were recorded
    assert "recorded: none" in demo_rise.run_seed(3, tmp_path, [], stage_timeout=1)
