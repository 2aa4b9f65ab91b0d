"""Nothing real skips in CI: a test whose real dependency is missing fails under CI (.ci/run sets
CI=true) and skips elsewhere, saying what to build. Checked on the vLLM-CPU tests with the
environment pointed at a folder that does not exist."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from testkit import REPO, in_ci


@pytest.mark.parametrize(
    ("value", "expected"),
    [("true", True), ("1", True), ("yes", True), ("", False), ("0", False), ("false", False), ("False", False)],
)
def test_in_ci_reads_the_ci_variable(value, expected):
    assert in_ci({"CI": value}) is expected
    assert in_ci({}) is False


def test_ci_run_sets_ci_for_the_readme_test_command():
    text = (REPO / ".ci" / "run").read_text()
    assert "export CI=${CI:-true}" in text and text.rstrip().endswith("make test")


def _vllm_test(tmp_path, ci: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"} | {"ASTRA_VLLM_VENV": str(tmp_path / "missing")}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
         "tests/data_synth/test_llm_vllm.py", "-k", "cached"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_a_missing_vllm_environment_fails_under_ci_and_skips_elsewhere(tmp_path):
    failed = _vllm_test(tmp_path, "true")
    assert failed.returncode == 1, failed.stdout[-2000:]
    assert "1 error" in failed.stdout and "no vLLM-CPU environment at" in failed.stdout
    skipped = _vllm_test(tmp_path, None)
    assert skipped.returncode == 0, skipped.stdout[-2000:]
    assert "1 skipped" in skipped.stdout and "scripts/bootstrap.sh builds it" in skipped.stdout
