"""The CPU platform: selected only by VERL_PLATFORM=cpu, inert otherwise, and enough for verl's CPU paths."""

from __future__ import annotations

import json
import re
from pathlib import Path

import verl
from testkit import run_python

from astra_verl.platform import cpu

VERL_ROOT = Path(verl.__file__).parent

PROBE = """
import json, os
import verl
import verl.utils.distributed as dist_utils
from verl.plugin.platform import PlatformRegistry, get_platform
from verl.workers.rollout.base import _ROLLOUT_REGISTRY
from verl.workers.rollout.replica import RolloutReplicaRegistry
from astra_verl.platform import cpu
print(json.dumps({
    "platforms": list(PlatformRegistry.registered_names()),
    "replica": "hf_cpu" in RolloutReplicaRegistry._registry,
    "adapter": _ROLLOUT_REGISTRY.get(("hf_cpu", "async")),
    "applied": list(cpu.applied_workarounds()),
    "dist_patched": dist_utils.initialize_global_process_group_ray.__module__ != "verl.utils.distributed",
    "engine_env": os.environ.get("VERL_ENGINE_DEVICE"),
    "device": get_platform().device_name,
}))
"""


WORKER = """
import json, os, torch
os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29631")
import verl
from verl.utils.distributed import initialize_global_process_group, initialize_global_process_group_ray
from verl.workers.engine.base import EngineRegistry
from verl.utils.device import get_device_id, get_torch_device
initialize_global_process_group_ray()  # what every training worker does (engine_workers.py)
t = torch.ones(2).to(get_device_id())
torch.distributed.all_reduce(t)
get_torch_device().empty_cache(); get_torch_device().synchronize()
ray_backend = torch.distributed.get_backend()
torch.distributed.destroy_process_group()
ranks = initialize_global_process_group()  # what the SFT trainer does (sft_trainer.run_sft)
print(json.dumps({
    "ray_backend": ray_backend, "sft_backend": torch.distributed.get_backend(), "sft_ranks": list(ranks),
    "tensor_device": str(t.device), "engine": EngineRegistry.get_engine_cls("language_model", "fsdp2").__name__,
}))
"""


def _probe(tmp_path, env):
    proc = run_python(PROBE + (WORKER if env.get("VERL_PLATFORM") == "cpu" else ""), env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            found.update(json.loads(line))
    return found


def test_without_verl_platform_nothing_is_patched_and_cpu_is_never_auto_detected(tmp_path):
    found = _probe(tmp_path, {"VERL_PLATFORM": "", "VERL_ENGINE_DEVICE": ""})
    assert "cpu" in found["platforms"] and found["replica"]  # registered (inert) for anyone who selects them
    assert found["adapter"] == "astra_verl.platform.hf_rollout.HFServerAdapter"
    assert found["applied"] == [] and not found["dist_patched"] and not found["engine_env"]
    assert found["device"] != "cpu"


def test_verl_platform_cpu_selects_the_platform_and_verls_cpu_paths_come_up(tmp_path):
    """Items 2 to 4 of docs/verl-internals.md#cpu-platform, through verl's own functions, in a worker-like process."""
    found = _probe(tmp_path, {"VERL_PLATFORM": "cpu"})
    assert found.pop("device") == "cpu"
    assert found.pop("dist_patched") and found.pop("engine_env") == "cuda"
    assert len(found.pop("applied")) == 2
    for key in ("platforms", "replica", "adapter"):
        found.pop(key)
    assert found == {
        "ray_backend": "cpu:gloo",
        "sft_backend": "cpu:gloo",
        "sft_ranks": [0, 0, 1],
        "tensor_device": "cpu",
        "engine": "FSDPEngineWithLMHead",
    }


def test_the_platform_answers_like_torch_cpu():
    platform = cpu.PlatformCPU()
    assert (platform.device_name, platform.current_device(), platform.communication_backend_name()) == (
        "cpu",
        "cpu",
        "gloo",
    )
    assert platform.ray_resource_options(1) == {"num_gpus": 1}  # the logical slot
    assert not platform.is_platform_available(use_smi_check=True)
    with platform.nvtx_range("x"):
        pass
    available, total = platform.device_module.mem_get_info()
    assert 0 < available <= total


def test_every_device_call_verl_makes_exists_on_the_device_module():
    """verl calls `get_torch_device().<fn>()`; each such fn must exist on the shim (or verl changed)."""
    called = set()
    for path in VERL_ROOT.rglob("*.py"):
        called |= set(re.findall(r"get_torch_device\(\)\.(\w+)", path.read_text(errors="ignore")))
    missing = sorted(name for name in called if not hasattr(cpu.PlatformCPU().device_module, name))
    assert not missing, f"verl calls get_torch_device().{missing}, which the CPU device module lacks"
