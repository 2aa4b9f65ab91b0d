"""bench/tau_small.py: a rerun whose episodes are all scored starts no server and redraws the
table with a row per policy; a run that misses a task is not called finished."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))  # the scripts import their siblings; only for this import
try:
    import tau_small
finally:
    sys.path.remove(str(BENCH))


def _results(out: Path, policy: str, domain: str, tasks: int, calls: float) -> None:
    run = out / f"{policy}_{domain}"
    run.mkdir(parents=True)
    records = [
        {
            "id": f"{i}:0",
            "version": 1,
            "status": "scored",
            "task": f"{domain}/test/{i}",
            "sample": 0,
            "policy": policy,
            "reward": 0.0,
            "tau_reward": 0.0,
            "tau_r_actions": 0.0,
            "tau_outputs_required": 0.0,
            "tau_action_f1": 0.0,
            "tau_r_outputs": 1.0,
            "tau_calls": calls,
            "tau_turns_after_prompt": 0.0,
            "ended_by": "loop",
            "terminated_by": "max_turns",
            "elapsed_s": 2.0,
        }
        for i in range(tasks)
    ]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def _model(path: Path) -> Path:
    path.mkdir()
    (path / "config.json").write_text("{}")
    return path


def test_a_finished_run_serves_nothing_and_tables_each_policy(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    for policy, calls in (("base", 0.0), ("sft", 7.0)):
        for domain in tau_small.DOMAINS:
            _results(out, policy, domain, 2, calls)

    def no_server(*args, **kwargs):
        raise AssertionError("a server was started for a finished run")

    monkeypatch.setattr(tau_small, "served", no_server)
    base, sft = _model(tmp_path / "base"), _model(tmp_path / "sft")
    argv = ["--limit", "2", "--out", str(out), "--base-model", str(base), "--sft-checkpoint", str(sft)]
    assert tau_small.main(argv) == 0
    text = capsys.readouterr().out
    assert "base: all 2 tasks of each domain already scored" in text
    for policy, calls in (("base", "0.00"), ("sft", "7.00")):
        for domain in tau_small.DOMAINS:
            assert f"| {policy} | {domain}/test | 2 | 1 | 0.000 | 0.000 | 1.000 | {calls} |" in text
    assert (out / "table.txt").read_text().count("/test |") == 4 and (out / "tau.png").stat().st_size > 0


def test_a_missing_task_or_domain_is_not_finished(tmp_path):
    out = tmp_path / "out"
    _results(out, "sft", "retail", 3, 1.0)
    args = tau_small.argparse.Namespace(out=out, limit=3)
    assert not tau_small.finished(args, "sft")  # airline has no run
    _results(out, "sft", "airline", 2, 1.0)
    assert not tau_small.finished(args, "sft")  # airline lacks task 2
    args.limit = 2
    assert tau_small.finished(args, "sft")
