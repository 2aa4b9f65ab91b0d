"""bench/transfer_seeds.py: one run folder's SFT seeds in one table, the seeds' spread in the SEs."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # the scripts import their siblings; only for this import
try:
    import transfer_seeds as ts
    import transfer_table as tt
finally:
    sys.path.remove(str(BENCH))

CATEGORIES = (*tt.SIMPLE, *tt.NON_LIVE_OTHER, "irrelevance", *tt.LIVE_AST, "live_irrelevance", "live_relevance")
SIZES = {c: 100 for c in CATEGORIES}
N = 10  # entries per category


def _model(right: dict[str, int], heldout: float = 0.5) -> dict:
    """Results of one model: in each category the first `right[c]` of N entries right (default 0)."""
    counts = {g: dict.fromkeys(tt.BEHAVIOURS, 0) for g in tt.GROUPS}
    counts["should call"]["call"] = 3
    bfcl = {c: {f"{c}_{i}": float(i < right.get(c, 0)) for i in range(N)} for c in CATEGORIES}
    envs = {f"e{i}": heldout + 0.05 * (i % 2) for i in range(6)}
    return {
        "bfcl": {"fc": bfcl},
        "behaviour": {"fc": counts},
        "multi": {},
        "heldout": {"heldout_data": envs, "heldout_shape": envs},
        "seconds": {},
    }


def _report(results: dict[str, dict], command: str = "bench/transfer.py") -> dict:
    labels = {"base": "base", "sft": "SFT", "sft_variants": "SFT + other half"}
    info = {"results": results, "sizes": SIZES, "labels": {m: labels[m] for m in results}, "command": command}
    return {"tables": {}, "info": info, "args": {"styles": ["fc"]}}


BASE = _model({"irrelevance": N, "live_irrelevance": N}, heldout=0.0)


def _write(folder: Path, reports: dict[int, dict]) -> Path:
    for seed, report in reports.items():
        name = "transfer.json" if seed == 0 else f"transfer-train{seed}.json"
        (folder / name).write_text(json.dumps(report))
    return folder


def test_equal_seeds_keep_the_entries_se_and_spread_seeds_widen_it():
    assert ts.combined([(0.2, 0.05), (0.2, 0.05)], (0.2, 0.05)) == pytest.approx((0.2, 0.05))
    mean, se = ts.combined([(0.0, 0.05), (0.4, 0.05)], (0.2, 0.04))
    assert mean == 0.2
    assert se == pytest.approx(math.sqrt(0.04**2 + 0.2**2))  # seeds' SE: SD 0.283 / sqrt(2)


def test_one_seed_is_refused_with_what_to_run(tmp_path):
    _write(tmp_path, {0: _report({"base": BASE, "sft_variants": _model({})})})
    with pytest.raises(SystemExit, match="only SFT seed 0's report.*--train-seed 1"):
        ts.load_reports(tmp_path)
    with pytest.raises(SystemExit, match="no transfer.json"):
        ts.load_reports(tmp_path / "nothing")


def test_the_mean_is_the_seed_averaged_model_and_a_model_of_fewer_seeds_is_named(tmp_path):
    seed0 = _report({"base": BASE, "sft": _model({"simple_python": 4}), "sft_variants": _model({"simple_python": 2})})
    seed1 = _report({"base": BASE, "sft_variants": _model({"simple_python": 6})})
    text, as_json = ts.summarize(ts.load_reports(_write(tmp_path, {0: seed0, 1: seed1})))
    assert as_json["models"] == ["sft_variants"]
    assert "Not in every seed, so not in this table: sft (seeds 0)" in text
    row = next(r for r in as_json["styles"]["fc"] if r["name"] == "simple_python")
    assert row["scores"]["sft_variants"] == pytest.approx(0.4)  # (2 + 6) / 2 of 10
    assert [d[0] for d in row["per_seed"]["sft_variants"].values()] == pytest.approx([0.2, 0.6])
    assert row["combined"]["sft_variants"][0] == pytest.approx(0.4)
    assert row["combined"]["sft_variants"][1] > 0.2  # the seeds' SE alone: 0.2
    assert "held-out F1 against plain SFT: n/a (no seed measured both)" not in text  # seed 0 measured both
    line = next(x for x in text.splitlines() if "heldout_data F1 not below plain SFT" in x)
    assert "(seed 0 only: entries' SE): +0.0 ± 0.0: met" in line  # the same held-out F1 in both models


def test_a_rise_one_seed_alone_shows_is_not_met_over_seeds(tmp_path):
    """Per seed, Non-Live Simple rises beyond 2 SE in seed 0 only; over the seeds it is within the spread."""
    strong = {c: N for c in tt.SIMPLE} | {"irrelevance": N, "live_irrelevance": N}
    weak = {"irrelevance": N, "live_irrelevance": N}
    reports = {s: _report({"base": BASE, "sft_variants": _model(strong if s == 0 else weak)}) for s in (0, 1, 2)}
    text, _ = ts.summarize(ts.load_reports(_write(tmp_path, reports)))
    line = next(x for x in text.splitlines() if "irrelevance within 2 SE of base" in x)
    assert "Non-Live Simple rises beyond 2 SE (+33.3 ± 33.3)" in line and line.endswith("MISSED")
    assert "| seed 0 − base | seed 1 − base | seed 2 − base |" in text


def test_the_command_line_writes_the_report_and_refuses_a_missing_folder(tmp_path, capsys):
    reports = {s: _report({"base": BASE, "sft_variants": _model({"simple_python": s})}) for s in (0, 1)}
    assert ts.main(["--out", str(_write(tmp_path, reports))]) == 0
    assert (tmp_path / "transfer-seeds.md").read_text().startswith("# Transfer over SFT seeds 0, 1")
    assert json.loads((tmp_path / "transfer-seeds.json").read_text())["seeds"] == [0, 1]
    assert (tmp_path / "transfer-seeds.png").stat().st_size > 10_000
    with pytest.raises(SystemExit) as e:
        ts.main(["--out", str(tmp_path / "absent")])
    assert e.value.code == 2 and "no such folder" in capsys.readouterr().err


def test_seeds_run_bench_transfer_once_each_with_the_passed_arguments_then_combine(tmp_path, monkeypatch):
    calls = []

    def fake_main(argv):  # bench/transfer.py: writes the seed's report where it would
        calls.append(argv)
        seed = int(argv[argv.index("--train-seed") + 1])
        _write(tmp_path, {seed: _report({"base": BASE, "sft_variants": _model({"simple_python": seed})})})
        return 0

    monkeypatch.setattr(ts.transfer, "main", fake_main)
    assert ts.main(["--out", str(tmp_path), "--seeds", "2,0,1", "--", "--per-category", "20"]) == 0
    assert calls == [["--out", str(tmp_path), "--train-seed", str(s), "--per-category", "20"] for s in (0, 1, 2)]
    assert json.loads((tmp_path / "transfer-seeds.json").read_text())["seeds"] == [0, 1, 2]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--seeds", "1"], "at least two seeds"),
        (["--seeds", "0,x"], "comma-separated whole numbers"),
        (["--", "--per-category", "20"], "give --seeds too"),
        (["--seeds", "0,1", "--", "--train-seed", "3"], "--train-seed after --: this script sets them"),
        (["--seeds", "0,1", "--", "--out=elsewhere"], "--out after --"),
    ],
)
def test_refused_arguments_say_what_to_do(tmp_path, argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        ts.main(["--out", str(tmp_path), *argv])
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_a_report_without_base_is_refused_with_the_fix(tmp_path):
    _write(tmp_path, {0: _report({"base": BASE, "sft_variants": _model({})}), 1: _report({"sft_variants": _model({})})})
    with pytest.raises(SystemExit, match="seed 1 .* has no base model.*base among --models"):
        ts.load_reports(tmp_path)
