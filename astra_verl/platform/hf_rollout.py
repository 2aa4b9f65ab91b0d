"""`rollout.name=hf_cpu`: a verl rollout backend that generates with transformers inside a Ray actor.

The three pieces verl expects of a rollout backend (see verl/workers/rollout/replica.py and base.py):

- `HFRolloutServer`, the Ray actor the agent loops talk to: `generate(prompt_ids, sampling_params,
  request_id, ...) -> TokenOutput` (token ids, per-token log-probs, stop reason, the weights' step),
  plus the lifecycle calls verl makes on vLLM's server (sleep / wake_up / abort / resume / ...).
  Concurrent requests are gathered into batches (`hf_engine.HFEngine.generate_batch`).
- `HFRolloutReplica`, the `RolloutReplica` verl's `LLMServerManager` builds: it launches one server
  per replica next to the training worker it belongs to (hybrid mode) and hands verl its handle.
- `HFServerAdapter`, the `BaseRollout` that lives inside each training worker (hybrid engine): verl's
  naive checkpoint engine calls `update_weights(per_tensor_param)` after every training step
  (`ActorRolloutRefWorker.update_weights`, verl/workers/engine_workers.py); the adapter streams the
  actor's full tensors to its server in buckets of `checkpoint_engine.update_weights_bucket_megabytes`,
  and the server loads them, checks that every parameter arrived, and compares a checksum of what it
  now holds with the checksum of what the actor sent (`custom.hf_cpu.verify_sync`). Each sync logs
  one line: `hf_cpu replica R: weights of step S loaded (N tensors, checksum C, ...)`.

One replica = one training process (tensor/data/pipeline parallel size 1). Backend options live under
`actor_rollout_ref.rollout.custom.hf_cpu` (`HFRolloutOptions`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import ray
import torch
from ray.actor import ActorHandle
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config import HFModelConfig, RolloutConfig
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutMode, RolloutReplica, TokenOutput
from verl.workers.rollout.utils import ensure_async_iterator

from astra_foundation.strict import StrictModel
from astra_verl.platform.hf_engine import GenerationRequest, HFEngine, torch_dtype
from astra_verl.platform.sampling import SamplingParams

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "INFO"))

SERVER_PREFIX = "hf_cpu_"


class HFRolloutOptions(StrictModel):
    """`actor_rollout_ref.rollout.custom.hf_cpu.*`."""

    section = "actor_rollout_ref.rollout.custom.hf_cpu"

    # seconds a batch waits for more requests before it starts (the agent loops send in bursts)
    batch_wait_s: float = 0.005
    # torch intra-op threads of the server process; 0 keeps torch's default
    num_threads: int = 0
    # compare a checksum of the loaded weights with the sent ones at every sync (costs one hash pass)
    verify_sync: bool = True

    @classmethod
    def from_rollout_config(cls, config: RolloutConfig) -> HFRolloutOptions:
        return cls.from_mapping((config.custom or {}).get("hf_cpu"))


def _check_parallelism(config: RolloutConfig) -> None:
    sizes = {
        "tensor_model_parallel_size": config.tensor_model_parallel_size,
        "data_parallel_size": config.data_parallel_size,
        "pipeline_model_parallel_size": config.pipeline_model_parallel_size,
    }
    bad = {k: v for k, v in sizes.items() if v != 1}
    if bad:
        raise ValueError(
            f"rollout.name=hf_cpu runs one model per replica; set {', '.join(f'rollout.{k}=1' for k in bad)}"
        )


def _eos_token_ids(model_config: HFModelConfig) -> list[int]:
    ids: list[int] = []
    gen = model_config.generation_config
    eos = getattr(gen, "eos_token_id", None) if gen is not None else None
    if eos is None and model_config.tokenizer is not None:
        eos = model_config.tokenizer.eos_token_id
    if isinstance(eos, int):
        ids.append(eos)
    elif eos:
        ids.extend(int(t) for t in eos)
    return ids


class _SyncHash:
    """Order-independent checksum of a weight sync: sha256 over the sorted per-tensor digests."""

    def __init__(self) -> None:
        self._parts: dict[str, str] = {}

    def add(self, name: str, tensor: torch.Tensor) -> None:
        data = tensor.detach().contiguous().view(torch.uint8).numpy().tobytes()
        self._parts[name] = hashlib.sha256(data).hexdigest()

    def hexdigest(self) -> str:
        digest = hashlib.sha256()
        for name in sorted(self._parts):
            digest.update(f"{name}={self._parts[name]};".encode())
        return digest.hexdigest()[:16]


@dataclass
class _Pending:
    request: GenerationRequest
    future: asyncio.Future


class HFRolloutServer:
    """The rollout server of one replica (a Ray actor, async): batches requests onto one model thread."""

    def __init__(
        self,
        config: RolloutConfig,
        model_config: HFModelConfig,
        rollout_mode: RolloutMode,
        replica_rank: int,
    ) -> None:
        self.config: RolloutConfig = omega_conf_to_dataclass(config)
        self.model_config: HFModelConfig = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        _check_parallelism(self.config)
        self.options = HFRolloutOptions.from_rollout_config(self.config)
        if self.options.num_threads > 0:
            torch.set_num_threads(self.options.num_threads)
        self.rollout_mode = rollout_mode
        self.replica_rank = replica_rank
        self.max_model_len = self.config.max_model_len or (self.config.prompt_length + self.config.response_length)
        self.engine = HFEngine(
            self.model_config.local_path,
            dtype=self.config.dtype,
            load_format=self.config.load_format,
            eos_token_ids=_eos_token_ids(self.model_config),
            logprobs_mode=self.config.logprobs_mode or "processed_logprobs",
            trust_remote_code=self.model_config.trust_remote_code,
            attn_implementation=self.model_config.override_config.get("attn_implementation", "sdpa"),
        )
        self.global_steps: int | None = None
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hf_cpu_model")
        self._pending: list[_Pending] = []
        self._wake = asyncio.Event()
        self._scheduler: asyncio.Task | None = None
        self._admit = asyncio.Event()  # closed while paused (abort_all_requests) or mid weight update
        self._admit.set()
        self._rejecting = False
        self._updating = False
        self._batch_running = False
        self._sync_names: list[str] = []
        self._sync_started = 0.0

    # ------------------------------------------------------------------ generation

    def _request(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationRequest:
        bad = [t for t in prompt_ids if not 0 <= t < self.engine.vocab_size]
        if bad:
            raise ValueError(
                f"hf_cpu rollout: prompt token ids {bad[:5]} are outside the model's vocabulary (0..{self.engine.vocab_size - 1})"
            )
        params = SamplingParams.from_request(dict(sampling_params))
        if self.config.full_determinism and params.seed is None:
            params = dataclasses.replace(params, seed=self.replica_rank + self.config.seed)
        room = self.max_model_len - len(prompt_ids)
        if room < 1:
            raise ValueError(
                f"hf_cpu rollout: prompt of {len(prompt_ids)} tokens leaves no room within max_model_len "
                f"{self.max_model_len}"
            )
        if params.max_tokens is not None:
            budget = params.max_tokens
        else:  # verl's default for vLLM: the response budget, capped by what is left of prompt+response
            budget = min(
                self.config.response_length, self.config.prompt_length + self.config.response_length - len(prompt_ids)
            )
        return GenerationRequest(prompt_ids=list(prompt_ids), params=params, max_tokens=max(1, min(budget, room)))

    def _aborted(self) -> TokenOutput:
        return TokenOutput(token_ids=[], log_probs=None, stop_reason="aborted", extra_fields=self._extra())

    def _extra(self) -> dict[str, Any]:
        return {"global_steps": self.global_steps}

    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str,
        image_data: Any = None,
        video_data: Any = None,
        audio_data: Any = None,
        mm_processor_kwargs: Any = None,
        priority: int = 0,
    ) -> TokenOutput:
        """Token-in, token-out generation (the interface of verl's vLLM server)."""
        if image_data is not None or video_data is not None or audio_data is not None:
            raise ValueError(f"hf_cpu rollout is text-only; request {request_id} carries image/video/audio data")
        request = self._request(list(prompt_ids), sampling_params)
        while not self._admit.is_set():
            if self._rejecting:
                return self._aborted()
            await self._admit.wait()
        future = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(request, future))
        self._wake.set()
        if self._scheduler is None or self._scheduler.done():
            self._scheduler = asyncio.create_task(self._schedule())
        result = await future
        if result is None:
            return self._aborted()
        stop_reason = "aborted" if result.finish_reason == "abort" else "completed"
        return TokenOutput(
            token_ids=result.token_ids, log_probs=result.log_probs, stop_reason=stop_reason, extra_fields=self._extra()
        )

    async def _schedule(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(self.options.batch_wait_s)
            await self._admit.wait()
            limit = max(1, self.config.max_num_seqs)
            batch, self._pending = self._pending[:limit], self._pending[limit:]
            if self._pending:
                self._wake.set()
            if not batch:
                continue
            self._batch_running = True
            try:
                results = await loop.run_in_executor(
                    self._executor, self.engine.generate_batch, [p.request for p in batch]
                )
            except Exception as exc:  # noqa: BLE001 - every waiting request learns why its batch failed
                for p in batch:
                    if not p.future.done():
                        p.future.set_exception(exc)
                continue
            finally:
                self._batch_running = False
            for p, result in zip(batch, results, strict=True):
                if not p.future.done():
                    p.future.set_result(result)

    # ------------------------------------------------------------------ weights

    async def _run(self, fn, *args):
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def begin_weight_update(self) -> None:
        self._updating = True
        self._admit.clear()
        self._sync_names = []
        self._sync_started = time.perf_counter()
        await self._run(self.engine.begin_weight_update)

    async def load_weights(self, bucket: list[tuple[str, torch.Tensor]]) -> int:
        count = await self._run(self.engine.load_weights, bucket)
        self._sync_names.extend(name for name, _ in bucket)
        return count

    async def finish_weight_update(self, global_steps: int | None, sent_checksum: str | None) -> str | None:
        try:
            await self._run(self.engine.finish_weight_update)
            loaded = None
            if sent_checksum is not None:
                loaded = await self._run(self._loaded_checksum)
                if loaded != sent_checksum:
                    raise RuntimeError(
                        f"hf_cpu replica {self.replica_rank}: weights of step {global_steps} differ after the sync "
                        f"(actor sent checksum {sent_checksum}, rollout holds {loaded})"
                    )
        finally:
            self._updating = False
            self._admit.set()
        self.global_steps = global_steps
        verified = f"checksum {loaded} = actor's" if loaded else "checksum not verified"
        # printed, not logged: Ray forwards worker stdout to the driver, and this line is the sync's audit trail
        print(
            f"hf_cpu replica {self.replica_rank}: weights of step {global_steps} loaded "
            f"({len(self._sync_names)} tensors, {verified}, {time.perf_counter() - self._sync_started:.2f}s)",
            flush=True,
        )
        return loaded

    def _loaded_checksum(self) -> str:
        """The checksum of what the model now holds under every name this sync wrote."""
        digest = _SyncHash()
        for name in self._sync_names:
            digest.add(name, self.engine.tensor(name))
        return digest.hexdigest()

    async def weights_checksum(self) -> str:
        return await self._run(self.engine.checksum)

    # ------------------------------------------------------------------ lifecycle (what verl calls on vLLM's server)

    async def wake_up(self, tags: list[str] | None = None) -> None:
        if self.rollout_mode == RolloutMode.HYBRID and (tags is None or "weights" in tags):
            await self._run(self.engine.allocate_weights)

    async def sleep(self) -> None:
        # Hybrid: the trainer owns the weights; release ours like vLLM's level-2 sleep (the next sync refills them).
        if self.rollout_mode == RolloutMode.HYBRID and self.config.free_cache_engine:
            await self._drain()
            await self._run(self.engine.release_weights)

    async def _drain(self) -> None:
        while self._pending or self._batch_running:
            await asyncio.sleep(0.01)

    async def clear_kv_cache(self) -> None:
        return None  # the KV cache lives only for one batch

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    async def wait_for_requests_to_drain(self) -> None:
        await self._drain()

    async def abort_all_requests(self, reset_prefix_cache: bool = True, reject_request: bool = False) -> dict:
        """Close admission, stop the running batch (its requests return what they have, 'aborted'), fail the queue."""
        self._admit.clear()
        self._rejecting = reject_request
        queued, self._pending = self._pending, []
        for p in queued:
            if not p.future.done():
                p.future.set_result(None)
        self.engine.abort()
        await self._run(lambda: None)  # wait for the running batch to return
        self.engine.clear_abort()
        return {"aborted_count": len(queued), "request_ids": []}

    async def resume_generation(self) -> None:
        self._rejecting = False
        if not self._updating:
            self._admit.set()

    async def aclose(self) -> None:
        """Stop the batching task (a server used in-process, e.g. by `eval envs`, outlives no event loop)."""
        if self._scheduler is not None:
            self._scheduler.cancel()
            await asyncio.gather(self._scheduler, return_exceptions=True)
            self._scheduler = None

    async def start_profile(self, **kwargs) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


class HFRolloutReplica(RolloutReplica):
    """One `HFRolloutServer` per replica, on the node of the training worker it serves."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _check_parallelism(self.config)
        self.server_class = ray.remote(HFRolloutServer)

    def server_name(self) -> str:
        if self.is_reward_model:
            role = "server_reward"
        elif self.is_teacher_model:
            role = "server_teacher"
        else:
            role = "server"
        return f"{SERVER_PREFIX}{role}_{self.replica_rank}_0{self.name_suffix}"

    async def launch_servers(self) -> None:
        if len(self.workers) != self.world_size:
            raise RuntimeError(f"hf_cpu replica {self.replica_rank}: {len(self.workers)} workers, expected 1")
        node_id = await self.workers[0].__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id())
        server = self.server_class.options(
            scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                node_id=node_id, soft=False
            ),
            name=self.server_name(),
            max_concurrency=self.max_concurrency,
        ).remote(
            config=self.config,
            model_config=self.model_config,
            rollout_mode=self.rollout_mode,
            replica_rank=self.replica_rank,
        )
        self.servers = [server]
        self._server_handle = server
        node_ip = await server.__ray_call__.remote(lambda self: ray.util.get_node_ip_address())
        # No HTTP endpoint: the address is only the load balancer's key for this replica.
        self._server_address = f"hf_cpu://{node_ip}/replica-{self.replica_rank}{self.name_suffix}"


class HFServerAdapter(BaseRollout):
    """Lives in the training worker; pushes the actor's weights into this worker's replica server."""

    def __init__(self, config: RolloutConfig, model_config: HFModelConfig, device_mesh=None, replica_rank: int = -1):
        super().__init__(config, model_config, device_mesh)
        _check_parallelism(self.config)
        self.options = HFRolloutOptions.from_rollout_config(self.config)
        self.replica_rank = int(os.environ.get("RANK", "0")) if replica_rank == -1 else replica_rank
        self.server_handle: ActorHandle | None = None

    def _server(self) -> ActorHandle:
        if self.server_handle is None:  # launched after the hybrid engine, so looked up lazily
            self.server_handle = ray.get_actor(f"{SERVER_PREFIX}server_{self.replica_rank}_0")
        return self.server_handle

    async def resume(self, tags: list[str]):
        if self.config.free_cache_engine:
            await self._server().wake_up.remote(tags=tags)

    async def release(self):
        if self.config.free_cache_engine:
            await self._server().sleep.remote()

    @torch.no_grad()
    async def update_weights(
        self,
        weights,
        global_steps: int | None = None,
        wire_format: str = "named_tensors",
        peft_config: Any = None,
        **kwargs,
    ):
        if wire_format != "named_tensors":
            raise NotImplementedError(f"hf_cpu rollout receives full tensors only, not wire_format={wire_format!r}")
        if peft_config is not None:
            raise NotImplementedError(
                "hf_cpu rollout cannot load LoRA adapters separately; set actor_rollout_ref.model.lora.merge=True"
            )
        server = self._server()
        dtype = torch_dtype(self.config.dtype)
        limit = self.config.checkpoint_engine.update_weights_bucket_megabytes << 20
        digest = _SyncHash() if self.options.verify_sync else None
        await server.begin_weight_update.remote()
        bucket, size = [], 0
        async for name, tensor in ensure_async_iterator(weights):
            tensor = tensor.detach().to("cpu", dtype)
            if digest is not None:
                digest.add(name, tensor)
            bucket.append((name, tensor))
            size += tensor.numel() * tensor.element_size()
            if size >= limit:
                await server.load_weights.remote(bucket)
                bucket, size = [], 0
        if bucket:
            await server.load_weights.remote(bucket)
        await server.finish_weight_update.remote(global_steps, digest.hexdigest() if digest else None)
