"""hf_cpu server and adapter, in process (no Ray): batching, verl's lifecycle calls, the weight sync and its check.

The server is the class verl's replica launches as a Ray actor; here it is driven directly, and the
adapter reaches it through `LocalHandle`, a stand-in for a Ray actor handle (`.method.remote(...)`
returns an awaitable), so what runs is the real server and the real adapter on one event loop.
"""

from __future__ import annotations

import asyncio

import pytest
import torch
from verl.workers.rollout.replica import RolloutMode

from astra_verl.platform.hf_engine import HFEngine
from astra_verl.platform.hf_rollout import HFRolloutServer, HFServerAdapter


class LocalHandle:
    """Duck-typed Ray actor handle over an in-process object; `tamper(name, tensor)` can corrupt loads."""

    def __init__(self, target, tamper=None):
        self._target, self._tamper = target, tamper

    def __getattr__(self, name):
        method = getattr(self._target, name)
        tamper = self._tamper

        class _Method:
            def remote(self, *args, **kwargs):
                if name == "load_weights" and tamper is not None:
                    args = ([(n, tamper(n, t)) for n, t in args[0]],)
                return method(*args, **kwargs)

        return _Method()


@pytest.fixture(scope="module")
def configs(tiny_model_dir):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = compose(
            "ppo_trainer",
            overrides=[
                "actor_rollout_ref.rollout.name=hf_cpu",
                "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
                "actor_rollout_ref.rollout.dtype=float32",
                "actor_rollout_ref.rollout.prompt_length=32",
                "actor_rollout_ref.rollout.response_length=6",
                "+actor_rollout_ref.rollout.custom.hf_cpu.batch_wait_s=0.05",
                f"actor_rollout_ref.model.path={tiny_model_dir}",
                "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
            ],
        )
    return cfg.actor_rollout_ref.rollout, cfg.actor_rollout_ref.model


@pytest.fixture
def server(configs):
    rollout, model = configs
    return HFRolloutServer(rollout, model, RolloutMode.HYBRID, replica_rank=0)


def _adapter(configs, server, tamper=None):
    rollout, model = configs
    adapter = HFServerAdapter(rollout, model, replica_rank=0)
    adapter.server_handle = LocalHandle(server, tamper)
    return adapter


GREEDY = {"temperature": 0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


@pytest.mark.asyncio
async def test_concurrent_requests_are_batched_and_answered_like_single_ones(server):
    sizes = []
    batch = server.engine.generate_batch
    server.engine.generate_batch = lambda requests: sizes.append(len(requests)) or batch(requests)
    prompts = [[5, 6, 7], [8, 9], [10, 11, 12, 13]]
    outputs = await asyncio.gather(
        *(server.generate(prompt_ids=p, sampling_params=dict(GREEDY), request_id=str(i)) for i, p in enumerate(prompts))
    )
    assert sizes == [3]
    for prompt, out in zip(prompts, outputs, strict=True):
        assert out.stop_reason == "completed" and len(out.token_ids) == 6  # response_length is the default budget
        assert len(out.log_probs) == 6 and out.extra_fields == {"global_steps": None}
        single = await server.generate(prompt_ids=prompt, sampling_params=dict(GREEDY), request_id="x")
        assert single.token_ids == out.token_ids


@pytest.mark.asyncio
async def test_budgets_and_bad_requests(server):
    short = await server.generate(prompt_ids=[5] * 34, sampling_params=dict(GREEDY), request_id="a")
    assert len(short.token_ids) == 4  # prompt_length + response_length - len(prompt) < response_length
    capped = await server.generate(prompt_ids=[5], sampling_params={**GREEDY, "max_tokens": 3}, request_id="b")
    assert len(capped.token_ids) == 3
    with pytest.raises(ValueError, match="no room"):
        await server.generate(prompt_ids=[5] * 38, sampling_params=dict(GREEDY), request_id="c")
    with pytest.raises(ValueError, match="text-only"):
        await server.generate(prompt_ids=[5], sampling_params={}, request_id="d", image_data=[object()])
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        await server.generate(prompt_ids=[5, 10**6], sampling_params=dict(GREEDY), request_id="f")
    with pytest.raises(ValueError, match="unsupported sampling"):
        await server.generate(prompt_ids=[5], sampling_params={"min_p": 0.1}, request_id="e")


@pytest.mark.asyncio
async def test_a_weight_sync_reaches_the_server_and_is_verified(configs, server, tiny_model_dir, capsys):
    adapter = _adapter(configs, server)
    prompt = [5, 6, 7, 8]
    await server.sleep()  # what the trainer does after rollout: the replica gives its weights back
    with pytest.raises(RuntimeError, match="released"):
        await server.generate(prompt_ids=prompt, sampling_params=dict(GREEDY), request_id="a")

    torch.manual_seed(7)
    new = HFEngine(str(tiny_model_dir), load_format="dummy").model.state_dict()  # other weights, ties intact
    await adapter.resume(tags=["weights"])
    await adapter.update_weights(iter(new.items()), global_steps=5, peft_config=None, base_sync_done=True)
    await adapter.resume(tags=["kv_cache"])

    out = await server.generate(prompt_ids=prompt, sampling_params=dict(GREEDY), request_id="b")
    reference = HFEngine(str(tiny_model_dir))
    reference.model.load_state_dict(new)
    with torch.no_grad():
        expected_logits = reference.model(torch.tensor([prompt + out.token_ids])).logits[0]
    assert out.token_ids[0] == int(expected_logits[len(prompt) - 1].argmax())
    assert out.log_probs[0] == pytest.approx(float(expected_logits[len(prompt) - 1].log_softmax(-1).max()), abs=1e-5)
    assert out.extra_fields["global_steps"] == 5
    line = capsys.readouterr().out
    assert "hf_cpu replica 0: weights of step 5 loaded (27 tensors, checksum" in line and "= actor's" in line


@pytest.mark.asyncio
async def test_a_corrupted_sync_fails_loudly(configs, server):
    def flip(name, tensor):
        return tensor + 1 if name == "model.norm.weight" else tensor

    adapter = _adapter(configs, server, tamper=flip)
    weights = {k: v.clone() for k, v in server.engine.model.state_dict().items()}
    with pytest.raises(RuntimeError, match="differ after the sync"):
        await adapter.update_weights(iter(weights.items()), global_steps=1)
    with pytest.raises(NotImplementedError, match="LoRA"):
        await adapter.update_weights(iter(weights.items()), peft_config={"r": 8})


@pytest.mark.asyncio
async def test_abort_returns_queued_requests_and_rejecting_refuses_new_ones(server):
    queued = asyncio.ensure_future(server.generate(prompt_ids=[5], sampling_params=dict(GREEDY), request_id="q"))
    await asyncio.sleep(0)  # queued, the batch window (50 ms) still open
    result = await server.abort_all_requests(reject_request=True)
    assert result["aborted_count"] == 1
    assert (await queued).stop_reason == "aborted"
    refused = await server.generate(prompt_ids=[5], sampling_params=dict(GREEDY), request_id="r")
    assert refused.stop_reason == "aborted" and refused.token_ids == []
    await server.resume_generation()
    served = await server.generate(prompt_ids=[5], sampling_params=dict(GREEDY), request_id="s")
    assert served.stop_reason == "completed"


def test_configuration_errors_are_named(configs):
    from omegaconf import OmegaConf

    rollout, model = configs

    def variant(**changes):
        return OmegaConf.create({**OmegaConf.to_container(rollout), **changes})

    wide = variant(tensor_model_parallel_size=2)
    with pytest.raises(ValueError, match="tensor_model_parallel_size=1"):
        HFRolloutServer(wide, model, RolloutMode.HYBRID, replica_rank=0)
    typo = variant(custom={"hf_cpu": {"batch_wait": 1}})
    with pytest.raises(ValueError, match="unknown keys"):
        HFServerAdapter(typo, model)
