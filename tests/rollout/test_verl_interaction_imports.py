"""Importing the plugin and loading interactions adds no module to verl's namespace.

verl 0.9.1 has no `verl.interactions`; an earlier shim wrote a fake one into `sys.modules`,
which any code probing verl (`find_spec`, `import verl.interactions`) then took for verl's own.
Every `verl` / `verl.*` module in `sys.modules` must be a file of the installed verl package.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest
from testkit import importable_package

from astra_verl.rollout.hooks import HookError
from astra_verl.rollout.verl_interaction import load_interactions

# Run in a fresh interpreter: `import verl` loads our plugin (its `verl.plugins` entry point),
# then interactions are loaded, one of them still importing verl's removed package.
# Prints every verl module whose file is not inside the installed verl package.
PROBE = """
import json, os, sys

import verl

from astra_verl.rollout.hooks import HookError
from astra_verl.rollout.verl_interaction import load_interactions

interactions = load_interactions(sys.argv[1])
try:
    load_interactions(sys.argv[2])
    stale = "loaded"
except HookError as exc:
    stale = str(exc)
root = os.path.realpath(os.path.dirname(verl.__file__)) + os.sep
verl_modules = [name for name in sys.modules if name == "verl" or name.startswith("verl.")]
foreign = {}
for name in verl_modules:
    file = getattr(sys.modules[name], "__file__", None)
    if file is None or not os.path.realpath(file).startswith(root):
        foreign[name] = file
print(json.dumps({
    "plugin": [m for m in ("astra_verl.plugin", "astra_verl.rollout.agent_loop") if m in sys.modules],
    "interactions": sorted(interactions),
    "stale": stale,
    "verl_modules": len(verl_modules),
    "foreign": foreign,
}))
"""

CURRENT = """
from astra_verl.rollout.verl_interaction import BaseInteraction


class PingInteraction(BaseInteraction):
    async def generate_response(self, instance_id, messages, **kwargs):
        return True, "pong", 1.0, {}
"""

STALE = """
from verl.interactions.base import BaseInteraction


class OldInteraction(BaseInteraction):
    pass
"""


@pytest.fixture
def configs(tmp_path, monkeypatch):
    """Two interaction configs: one importing our BaseInteraction, one verl <= 0.7's."""
    importable_package(tmp_path, "probe_interactions", {"current": CURRENT, "stale": STALE}, monkeypatch)
    current = tmp_path / "current.yaml"
    current.write_text("interaction:\n  - class_name: probe_interactions.current.PingInteraction\n")
    stale = tmp_path / "stale.yaml"
    stale.write_text("interaction:\n  - class_name: probe_interactions.stale.OldInteraction\n")
    return tmp_path, str(current), str(stale)


def test_no_foreign_module_under_verl_after_plugin_and_interactions(configs):
    tmp_path, current, stale = configs
    pythonpath = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, current, stale],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": pythonpath},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["foreign"] == {}, f"modules under verl that verl does not provide: {report['foreign']}"
    assert report["plugin"] == ["astra_verl.plugin", "astra_verl.rollout.agent_loop"], done.stderr[-3000:]
    assert report["interactions"] == ["ping"]
    assert "verl.interactions" in report["stale"] and "astra_verl.rollout.verl_interaction" in report["stale"]
    assert report["verl_modules"] > 10  # verl and its submodules were imported, so the check saw them


def test_interaction_importing_verl_interactions_gets_the_fix(configs):
    _, _, stale = configs
    installed = importlib.metadata.version("verl")
    with pytest.raises(HookError) as raised:
        load_interactions(stale)
    message = str(raised.value)
    assert stale in message and "interaction[0]" in message
    assert f"imports verl.interactions, which verl {installed} does not have" in message
    assert "import BaseInteraction from astra_verl.rollout.verl_interaction instead" in message
    assert "verl.interactions" not in sys.modules and "verl.interactions.base" not in sys.modules
