"""The run-directory helpers both synthesis pipelines share (data_synth/pipeline/run_options.py):
one `check_run_dir`, one `step_settings`, one `failures` for `data_synth env` and `data_synth traj`."""

from __future__ import annotations

import pytest

from astra_foundation.clikit import UsageError
from astra_foundation.llm import LLMConfig
from data_synth.pipeline import RunStats
from data_synth.pipeline.manifest import ManifestError, record_settings
from data_synth.pipeline.run_options import answered_by, check_run_dir, exit_status, failures, step_settings


def test_check_run_dir_refuses_what_the_command_cannot_use(tmp_path):
    missing, a_file = tmp_path / "missing", tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(UsageError, match=r"does not exist; run `ingest` \(or `run`\) into it first"):
        check_run_dir(missing, "traj", creates=False, first="ingest")
    check_run_dir(missing, "traj", creates=True, first="ingest")  # the command makes it
    assert not missing.exists()  # ... but not here: nothing is written before the command runs
    with pytest.raises(UsageError, match="is not a directory"):
        check_run_dir(a_file, "env", creates=True, first="decompose")
    record_settings(tmp_path, "env", {"env.decompose": {"mode": "domain"}}, force=False)
    check_run_dir(tmp_path, "env", creates=False, first="decompose")
    with pytest.raises(ManifestError, match="env"):
        check_run_dir(tmp_path, "traj", creates=False, first="ingest")


def test_step_settings_calls_only_the_written_steps_rules():
    def unreadable() -> dict:
        raise AssertionError("a step this command does not write was asked for its settings")

    table = {"a": lambda: {"k": 1}, "b": unreadable}
    assert step_settings(["a"], table) == {"a": {"k": 1}}
    with pytest.raises(KeyError, match="no settings rule for step\\(s\\) c; known: a, b"):
        step_settings(["a", "c"], table)


def test_answered_by_names_the_model_or_the_dry_run():
    assert answered_by(None) == ""
    assert answered_by(LLMConfig(model="m", responder="x:y")) == "m"
    assert answered_by(LLMConfig(responder="x:y")) == "x:y"


def test_failures_and_the_exit_status(capsys):
    ok, bad = RunStats(step="s", ok=3), RunStats(step="t", ok=1, error=2)
    assert failures([ok]) == [] and exit_status([]) == 0
    problems = failures([ok, bad], bad_inputs="1 input line was rejected", nothing_made=None)
    assert problems == [
        "2 records errored (first error printed above); rerun the same command to retry them",
        "1 input line was rejected",
    ]
    assert exit_status(problems) == 1
    assert capsys.readouterr().err.splitlines() == [f"error: {p}" for p in problems]
