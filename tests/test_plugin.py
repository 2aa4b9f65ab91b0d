"""The verl.plugins entry point registers everything, in a fresh interpreter, loudly on failure."""

from __future__ import annotations

import json

from testkit import run_python

EXPECTED_AGENT_LOOPS = {"astra_tool_agent"}
EXPECTED_REWARD_MANAGERS = {"astra_f1", "astra_recall", "astra_precision", "astra_bfcl"}


def test_import_verl_registers_astra_parts_in_a_fresh_interpreter(tmp_path):
    code = """
import json, verl
from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
print(json.dumps({"loops": sorted(_agent_loop_registry), "rewards": sorted(REWARD_MANAGER)}))
"""
    proc = run_python(code, cwd=tmp_path)  # outside the repo: only the installed plugin can register
    assert proc.returncode == 0, proc.stderr
    assert "astra-verl plugin" not in proc.stderr, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert EXPECTED_AGENT_LOOPS <= set(found["loops"]), found
    assert EXPECTED_REWARD_MANAGERS <= set(found["rewards"]), found
    # registered under our names, not replacing verl's own
    assert {"tool_agent", "single_turn_agent"} <= set(found["loops"])
    assert "naive" in found["rewards"]


def test_a_broken_part_is_reported_at_error_level_with_its_exception(tmp_path):
    broken = tmp_path / "astra_broken_part.py"
    broken.write_text("raise RuntimeError('deliberately broken for the test')\n")
    code = """
import logging, sys
logging.basicConfig(level=logging.WARNING)
from astra_verl import plugin
try:
    plugin.load(("astra_broken_part",))
except plugin.PluginLoadError as exc:
    print("RAISED", exc)
"""
    proc = run_python(code, env={"PYTHONPATH": str(tmp_path), "VERL_USE_EXTERNAL_PLUGINS": "none"}, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "RAISED" in proc.stdout
    assert "ERROR" in proc.stderr and "astra_broken_part" in proc.stderr
    assert "RuntimeError: deliberately broken for the test" in proc.stderr


def test_verl_entry_point_names_our_module():
    from importlib.metadata import entry_points

    eps = {ep.name: ep.value for ep in entry_points(group="verl.plugins")}
    assert eps.get("astra_verl") == "astra_verl.plugin"
