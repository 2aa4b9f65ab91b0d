"""A wheel built from the repo resolves `+recipe=astra_grpo` on its own (no editable install).

The fresh venv sees this environment's site-packages as a plain path entry (so verl and its
dependencies are there) without processing its .pth files (so the editable astra-verl is not).
The verl plugin is switched off to prove the Hydra namespace-package route works by itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv

import pytest
from testkit import REPO


@pytest.mark.slow
def test_wheel_install_resolves_recipe(tmp_path):
    wheel_dir = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation", "-w", str(wheel_dir)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = wheel_dir.glob("astra_verl-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with open(os.path.join(site, "host_site.pth"), "w") as f:
        f.write(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", site, str(wheel)],
        check=True,
        capture_output=True,
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["VERL_USE_EXTERNAL_PLUGINS"] = "none"
    # Every top-level package ships (a folder without __init__.py would import from a source tree
    # and silently be missing from the wheel).
    packages = ("astra_foundation", "astra_foundation.sandbox", "astra_verl", "env_registry", "data_synth")
    code = f"import importlib; print('\\n'.join(importlib.import_module(p).__file__ for p in {packages!r}))"
    where = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert where.returncode == 0, where.stderr
    assert all(str(env_dir) in line for line in where.stdout.splitlines()), where.stdout
    code = "import astra_verl_recipes, sys; print(astra_verl_recipes.__file__)"
    where = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert where.returncode == 0, where.stderr
    assert str(env_dir) in where.stdout, f"recipes came from {where.stdout}, not the wheel"
    proc = subprocess.run(
        [str(py), "-m", "verl.trainer.main_ppo", "+recipe=astra_grpo", "--cfg", "job"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "default_agent_loop: astra_tool_agent" in proc.stdout
    assert "name: astra_f1" in proc.stdout
