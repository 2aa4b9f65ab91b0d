"""Every command line the README names answers `--help` in a fresh interpreter, exit 0, with a usage
line a user can copy (`python -m <module>`, not a file name); a wrong first word is exit 2 with the
choices on stderr."""

from __future__ import annotations

import subprocess
import sys

import pytest

CLIS = [
    "data_synth",
    "data_synth env",
    "data_synth env run",
    "data_synth traj",
    "data_synth traj import-astra",
    "env_registry",
    "env_registry export-parquet",
    "astra_verl.eval",
    "astra_verl.eval envs",
    "astra_verl.inspect",
    "astra_verl.models",
    "astra_verl.demo",
    "astra_verl.tiny_model",
]


# The commands that draw progress bars: `-q/--quiet` turns them off, the same flag everywhere.
QUIET = {"data_synth env run", "data_synth traj", "env_registry", "astra_verl.eval envs"}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("cli", CLIS)
def test_help_exits_0_with_a_usage_line_naming_the_module(cli):
    module = cli.split()[0]
    proc = _run(*cli.split(), "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(f"usage: python -m {module}"), proc.stdout[:300]
    assert "Traceback" not in proc.stderr
    if cli in QUIET:
        assert "-q, --quiet" in proc.stdout, f"{cli} has no -q/--quiet"


def test_an_unknown_pipeline_is_exit_2_with_the_choices():
    proc = _run("data_synth", "bogus")
    assert proc.returncode == 2 and "error: unknown pipeline 'bogus'; choose one of: env, traj" in proc.stderr
