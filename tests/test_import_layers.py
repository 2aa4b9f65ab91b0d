"""The import contract (.importlinter) holds: a wrong-way import between layers fails the suite."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from testkit import REPO

CONTRACT = REPO / ".importlinter"


def lint(config, cwd=REPO):
    return subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; lint_imports_command()",
         "--config", str(config), "--no-cache"],
        capture_output=True, text=True, cwd=cwd, timeout=300,
    )  # fmt: skip


def copy_packages(dest):
    for package in ("astra_foundation", "astra_verl", "env_registry", "data_synth"):
        subprocess.run(["cp", "-r", str(REPO / package), str(dest / package)], check=True)


def test_the_layers_hold():
    proc = lint(CONTRACT)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "4 kept, 0 broken" in proc.stdout


def test_a_wrong_way_import_breaks_the_contract(tmp_path):
    # A copy of the four packages in which the sandbox (the ground floor) imports the agent loop.
    copy_packages(tmp_path)
    wrong = tmp_path / "astra_foundation" / "sandbox" / "config.py"
    wrong.write_text(
        wrong.read_text()
        + textwrap.dedent("""
        def _wrong_way():
            from astra_verl.rollout import agent_loop  # an upward import, even inside a function
        """)
    )
    proc = lint(CONTRACT, cwd=tmp_path)
    assert proc.returncode != 0
    assert "astra_foundation.sandbox.config -> astra_verl.rollout.agent_loop" in proc.stdout


def test_rollout_and_reward_do_not_import_each_other(tmp_path):
    # They share the episode contract (astra_verl.calls) below both; an import across is a circle.
    copy_packages(tmp_path)
    wrong = tmp_path / "astra_verl" / "reward" / "f1.py"
    wrong.write_text(wrong.read_text() + "\nfrom astra_verl.rollout import toolset  # noqa: E402\n")
    proc = lint(CONTRACT, cwd=tmp_path)
    assert proc.returncode != 0
    assert "astra_verl.reward.f1 -> astra_verl.rollout.toolset" in proc.stdout
