"""verl on CPU: the "cpu" platform, the `hf_cpu` rollout backend's registration, and every CPU fix.

verl 0.9.1 ships platforms for CUDA, Ascend NPU and ROCm only (`verl/plugin/platform/`). This module
registers a fourth, "cpu", selected by verl's own switch `VERL_PLATFORM=cpu` (read by
`verl/plugin/platform/platform_manager.py::_detect_platform_name`). It is imported by the astra-verl
plugin in every process (driver, TaskRunner, every Ray worker), so selecting the platform in the
environment of the driver and of the Ray workers (`ray_kwargs.ray_init.runtime_env.env_vars`) is all a
run needs.

What importing this module does:
- always (inert registrations, no behaviour change): the platform class under the name "cpu" (it never
  auto-detects itself: only `VERL_PLATFORM=cpu` selects it) and the rollout backend name `hf_cpu`;
- only when `VERL_PLATFORM=cpu`: the workarounds below (`apply_cpu_workarounds`), each naming the verl
  code it works around. Nothing is patched for anyone else. tests/platform/test_verl_internals.py
  asserts that the verl code each one depends on still looks the way it did in verl 0.9.1, so an
  upgrade fails that test instead of a training run.

On this platform Ray's "GPU" resource is a logical slot: one per training process, declared with
`ray_kwargs.ray_init.num_gpus=N` (verl counts "GPU"/"NPU" in `ResourcePoolManager._check_resource_available`
and puts one per bundle in its placement groups); no CUDA is used anywhere.
"""

from __future__ import annotations

import logging
import os
import types
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import psutil
import torch
import verl.utils.distributed as dist_utils
from verl.plugin.platform.platform_base import PlatformBase
from verl.plugin.platform.platform_manager import PlatformRegistry
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.replica import RolloutReplicaRegistry

logger = logging.getLogger(__name__)

PLATFORM_NAME = "cpu"
PLATFORM_ENV = "VERL_PLATFORM"  # verl's own platform switch
ROLLOUT_NAME = "hf_cpu"
_APPLIED: list[str] = []  # names of the workarounds applied in this process, for logs and tests


def cpu_selected() -> bool:
    """The single place that decides whether the CPU platform is on in this process."""
    return os.environ.get(PLATFORM_ENV, "").strip().lower() == PLATFORM_NAME


def applied_workarounds() -> tuple[str, ...]:
    return tuple(_APPLIED)


# ---------------------------------------------------------------------------------------------------
# The platform
# ---------------------------------------------------------------------------------------------------


def _host_memory() -> tuple[int, int]:
    """(available, total) bytes of host memory: what a device memory query means on CPU."""
    vm = psutil.virtual_memory()
    return int(vm.available), int(vm.total)


def _build_device_module() -> types.ModuleType:
    """A `torch.cuda`-shaped namespace for CPU, for code that calls `get_torch_device().<fn>()`.

    `torch.cpu` already answers the device and stream calls (current_device() is "cpu", so
    `tensor.to(get_device_id())` lands on the CPU); the caching-allocator calls have no CPU meaning
    and are no-ops (statistics report 0), `mem_get_info` reports host memory, RNG state is torch's.
    """
    shim = types.ModuleType("astra_verl.platform.cpu.device_module")
    for name in ("current_device", "device_count", "is_available", "synchronize", "current_stream", "stream"):
        setattr(shim, name, getattr(torch.cpu, name))
    shim.Stream = torch.cpu.Stream
    shim.Event = torch.cpu.Event
    shim.set_device = lambda device=None: None
    shim.empty_cache = lambda: None
    shim.ipc_collect = lambda: None
    shim.reset_peak_memory_stats = lambda device=None: None
    shim.set_per_process_memory_fraction = lambda fraction, device=None: None
    for stat in ("memory_allocated", "memory_reserved", "max_memory_allocated", "max_memory_reserved"):
        setattr(shim, stat, lambda device=None: 0)
    shim.mem_get_info = lambda device=None: _host_memory()
    shim.get_device_name = lambda device=None: "cpu"
    shim.get_rng_state = lambda device="cpu": torch.get_rng_state()
    shim.set_rng_state = lambda state, device="cpu": torch.set_rng_state(state)
    shim.manual_seed = torch.manual_seed
    shim.manual_seed_all = torch.manual_seed
    shim.is_initialized = lambda: True
    return shim


_DEVICE_MODULE = _build_device_module()


@PlatformRegistry.register(platform=PLATFORM_NAME)
class PlatformCPU(PlatformBase):
    """verl platform for hosts without an accelerator: torch on CPU, gloo collectives."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> types.ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # Never auto-detected: a GPU host without VERL_PLATFORM keeps verl's own detection.
        return False

    def current_device(self) -> str:  # type: ignore[override]  # torch.cpu.current_device() is "cpu" too
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # Ray sets it for actors holding the logical "GPU" slots; nothing on CPU reads it.
        return "CUDA_VISIBLE_DEVICES"

    @contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "GPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None


# ---------------------------------------------------------------------------------------------------
# Rollout backend registration
# ---------------------------------------------------------------------------------------------------


def _load_hf_replica():
    # verl calls this loader only when rollout.name=hf_cpu; hf_rollout imports ray and transformers.
    from astra_verl.platform.hf_rollout import HFRolloutReplica

    return HFRolloutReplica


def register_rollout_backend() -> None:
    """Make `actor_rollout_ref.rollout.name=hf_cpu` resolvable by verl, lazily (nothing heavy imported).

    verl resolves a rollout backend in two registries: the replica (server side) through the public
    `RolloutReplicaRegistry.register` (verl/workers/rollout/replica.py), and the in-worker adapter
    through `_ROLLOUT_REGISTRY` (verl/workers/rollout/base.py::get_rollout_class), a module dict with no
    register function: the entry is added to it directly (guarded by a test).
    """
    RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_hf_replica)
    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = "astra_verl.platform.hf_rollout.HFServerAdapter"


# ---------------------------------------------------------------------------------------------------
# Workarounds, applied only when the CPU platform is selected
# ---------------------------------------------------------------------------------------------------

# verl/utils/distributed.py builds the default backend as f"cpu:gloo,{device}:{backend}"; with device
# "cpu" that is "cpu:gloo,cpu:gloo", which torch rejects ("Duplicate device type cpu").
CPU_PROCESS_GROUP_BACKEND = "cpu:gloo"


def _dedupe_backend(backend: str | None) -> str:
    if not backend:
        return CPU_PROCESS_GROUP_BACKEND
    pairs = dict.fromkeys(part.strip() for part in backend.split(",") if part.strip())
    devices = [p.split(":", 1)[0] for p in pairs]
    if len(set(devices)) != len(devices):
        return CPU_PROCESS_GROUP_BACKEND
    return ",".join(pairs)


def _fix_process_group_init() -> None:
    """Works around verl/utils/distributed.py::initialize_global_process_group and
    ::initialize_global_process_group_ray, which hard-code `cpu:gloo,{device}:{backend}` (stop (4) in
    VERL.md). Replaced in the module before any verl worker module imports them by name (engine_workers,
    checkpoint_engine/base and sft_trainer import them after `import verl` has loaded this plugin)."""
    original_ray = dist_utils.initialize_global_process_group_ray

    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        return original_ray(timeout_second=timeout_second, backend=_dedupe_backend(backend))

    def initialize_global_process_group(timeout_second=36000):
        # Same as verl's, without the duplicate backend and without set_device (no device to pick).
        torch.distributed.init_process_group(
            backend=CPU_PROCESS_GROUP_BACKEND,
            timeout=timedelta(seconds=timeout_second),
            init_method=os.environ.get("DIST_INIT_METHOD", None),
        )
        return int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

    initialize_global_process_group_ray.__wrapped__ = original_ray
    initialize_global_process_group.__wrapped__ = dist_utils.initialize_global_process_group
    dist_utils.initialize_global_process_group_ray = initialize_global_process_group_ray
    dist_utils.initialize_global_process_group = initialize_global_process_group
    _APPLIED.append("verl.utils.distributed.initialize_global_process_group[_ray]: backend cpu:gloo")


# verl/workers/engine/base.py::EngineRegistry.get_engine_cls looks engines up by (device, vendor); the
# FSDP engines register for "cuda" and "npu" only, although they run on CPU unchanged (stop (5)). verl
# provides these two overrides for exactly this; set here unless the user set them.
ENGINE_OVERRIDES = {"VERL_ENGINE_DEVICE": "cuda", "VERL_ENGINE_VENDOR": "nvidia"}


def _select_fsdp_engines() -> None:
    for key, value in ENGINE_OVERRIDES.items():
        os.environ.setdefault(key, value)
    _APPLIED.append("verl.workers.engine.base.EngineRegistry.get_engine_cls: VERL_ENGINE_DEVICE/VENDOR")


def apply_cpu_workarounds() -> tuple[str, ...]:
    """Apply every CPU workaround once in this process; a no-op unless the CPU platform is selected."""
    if not cpu_selected() or _APPLIED:
        return applied_workarounds()
    _fix_process_group_init()
    _select_fsdp_engines()
    logger.info("astra-verl CPU platform: applied %s", "; ".join(_APPLIED))
    return applied_workarounds()


register_rollout_backend()
apply_cpu_workarounds()
