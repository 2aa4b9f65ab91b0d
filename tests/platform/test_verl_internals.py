"""Guards: the verl 0.9.1 internals astra_verl/platform/ depends on still look the way they did.

Each workaround in astra_verl/platform/cpu.py (and each contract hf_rollout.py implements) rests on a
piece of verl code; every test here names it and asserts what the workaround assumes. After a verl
upgrade a failure here says which assumption broke, instead of a training run failing somewhere later.
"""

from __future__ import annotations

import inspect
import re

import verl
import verl.utils.distributed as dist_utils
from verl.plugin.platform import platform_manager
from verl.plugin.platform.platform_base import PlatformBase
from verl.single_controller.ray import base as ray_base
from verl.workers import engine_workers
from verl.workers.engine.base import EngineRegistry
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout import llm_server, replica

from astra_verl.platform import hf_rollout


def _original(fn):
    return getattr(fn, "__wrapped__", fn)  # cpu.py keeps verl's function as __wrapped__ when it patched it


def test_verl_is_the_version_these_workarounds_were_written_for():
    assert verl.__version__ == "0.9.1", "re-check every test in this file against the new verl, then update it"


def test_platform_is_chosen_by_verl_platform_and_instantiated_from_the_registry():
    # cpu.py relies on: VERL_PLATFORM picks a registered name; the class is built with no arguments
    source = inspect.getsource(platform_manager._detect_platform_name)
    assert 'os.environ.get("VERL_PLATFORM"' in source
    assert "PlatformRegistry.get(name)" in inspect.getsource(platform_manager._create_platform)
    abstract = {name for name, v in vars(PlatformBase).items() if getattr(v, "__isabstractmethod__", False)}
    assert abstract == {
        "device_name", "vendor_name", "device_module", "is_available", "current_device", "device_count",
        "set_device", "synchronize", "manual_seed", "manual_seed_all", "set_allocator_settings", "empty_cache",
        "get_device_capability", "communication_backend_name", "visible_devices_envvar", "nvtx_range",
        "profiler_start", "profiler_stop", "ray_resource_name", "ray_noset_envvars", "is_ipc_supported", "cudart",
    }  # fmt: skip


def test_process_group_init_still_hard_codes_the_duplicate_backend():
    # cpu.py::_fix_process_group_init replaces both (verl/utils/distributed.py)
    plain = _original(dist_utils.initialize_global_process_group)
    ray_init = _original(dist_utils.initialize_global_process_group_ray)
    assert str(inspect.signature(plain)) == "(timeout_second=36000)"
    assert str(inspect.signature(ray_init)) == "(timeout_second=None, backend=None)"
    assert 'backend = f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"' in inspect.getsource(plain)
    assert "get_torch_device().set_device(local_rank)" in inspect.getsource(plain)
    assert 'backend = backend or f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"' in inspect.getsource(ray_init)


def test_callers_import_the_process_group_init_after_plugins_load():
    # The patch replaces module attributes; callers must bind them by name at import (after `import verl`).
    assert "from verl.utils.distributed import initialize_global_process_group_ray" in inspect.getsource(engine_workers)
    from verl.trainer import sft_trainer

    assert "from verl.utils.distributed import initialize_global_process_group\n" in inspect.getsource(
        sft_trainer.run_sft
    )


def test_engine_lookup_honours_the_device_override_and_fsdp_registers_for_cuda():
    # cpu.py::_select_fsdp_engines sets VERL_ENGINE_DEVICE/VENDOR (verl.workers.engine.base)
    source = inspect.getsource(EngineRegistry.get_engine_cls)
    assert 'os.getenv("VERL_ENGINE_DEVICE")' in source and 'os.getenv("VERL_ENGINE_VENDOR")' in source
    import verl.workers.engine  # noqa: F401  - registers the engines

    assert "cuda" in EngineRegistry._engines["language_model"]["fsdp2"]


def test_rollout_registries_have_the_shape_cpu_py_writes_into():
    # cpu.py::register_rollout_backend (verl.workers.rollout.base and .replica)
    assert isinstance(rollout_base._ROLLOUT_REGISTRY, dict)
    assert rollout_base._ROLLOUT_REGISTRY[("vllm", "async")] == "verl.workers.rollout.vllm_rollout.ServerAdapter"
    assert "_ROLLOUT_REGISTRY[(rollout_name, mode)]" in inspect.getsource(rollout_base.get_rollout_class)
    assert (
        str(inspect.signature(replica.RolloutReplicaRegistry.register))
        == "(name: str, loader: Callable[[], type[verl.workers.rollout.replica.RolloutReplica]]) -> None"
    )
    assert replica.get_rollout_replica_class("hf_cpu") is hf_rollout.HFRolloutReplica


def test_ray_resources_count_gpu_slots_which_the_cpu_platform_declares():
    # the CPU platform's ray_resource_name() is "GPU" (a logical slot): verl only counts GPU/NPU
    source = inspect.getsource(ray_base.ResourcePoolManager._check_resource_available)
    assert 'node_info.get("GPU", 0)' in source
    assert "current_platform.ray_resource_name()" in inspect.getsource(ray_base.RayResourcePool.get_placement_groups)


def test_every_call_verl_makes_on_a_rollout_server_exists_on_ours():
    called = set(re.findall(r"server\.(\w+)\.remote", inspect.getsource(replica.RolloutReplica)))
    called |= set(re.findall(r"server\.(\w+)\.remote", inspect.getsource(llm_server.LLMServerClient)))
    assert {"generate", "wake_up", "sleep", "abort_all_requests"} <= called
    missing = sorted(name for name in called if not hasattr(hf_rollout.HFRolloutServer, name))
    assert not missing, f"verl calls {missing} on rollout servers; HFRolloutServer lacks them"


def test_generate_is_called_with_keywords_our_server_accepts():
    source = inspect.getsource(llm_server.LLMServerClient.generate)
    call = source[source.index("server.generate.remote(") :]
    call = call[: call.index(")\n")]
    sent = set(re.findall(r"(\w+)=", call))
    accepted = set(inspect.signature(hf_rollout.HFRolloutServer.generate).parameters)
    assert sent <= accepted, f"LLMServerClient sends {sorted(sent - accepted)}, which HFRolloutServer.generate lacks"


def test_the_naive_weight_sync_calls_the_adapter_the_way_hf_rollout_expects():
    # ActorRolloutRefWorker.update_weights (verl.workers.engine_workers), used by the sync trainer
    source = inspect.getsource(engine_workers.ActorRolloutRefWorker.update_weights)
    assert 'await self.rollout.resume(tags=["weights"])' in source
    assert "await self.rollout.update_weights(\n            per_tensor_param, peft_config=peft_config" in source
    assert 'await self.rollout.resume(tags=["kv_cache"])' in source
    adapter = inspect.signature(hf_rollout.HFServerAdapter.update_weights).parameters
    assert {"weights", "global_steps", "peft_config", "wire_format", "kwargs"} <= set(adapter)
    worker = inspect.getsource(engine_workers.ActorRolloutRefWorker.init_model)
    assert "rollout_cls(\n                config=rollout_config, model_config=model_config, device_mesh=" in worker
