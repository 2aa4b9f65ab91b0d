"""Drive agent loops in-process, without Ray or an inference server (tests, benchmarks, debugging).

verl builds agent loops inside Ray workers against a vLLM/SGLang server. To exercise a loop
(ours or verl's) on a laptop, this module supplies the pieces verl would:

- `compose_trainer_config(model_path, overrides)`: the real `ppo_trainer` config via Hydra;
- `ScriptedServer`: a duck-typed server manager (`async generate(request_id, *, prompt_ids,
  sampling_params, **kw) -> TokenOutput`) that replays scripted assistant turns as token ids;
- `ModelServer`: the same interface over a (tiny) transformers model with real sampling;
- `make_loop(...)` / `run(...)`: construct a loop the way `AgentLoopWorker` does and run
  coroutines on verl's event loop (loops capture it at construction).

These are harnesses, not a rollout backend: training uses verl's servers.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import hydra
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.utils.ray_utils import get_event_loop
from verl.workers.rollout.replica import TokenOutput

from .context import RolloutContext, drop_worker_context

Script = Sequence[str] | Callable[[str, int], str]


def compose_trainer_config(model_path: str, overrides: Sequence[str] = ()) -> Any:
    """verl's `ppo_trainer` config with a rollout name set and the model at `model_path`."""
    GlobalHydra.instance().clear()
    base = [
        f"actor_rollout_ref.model.path={model_path}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.multi_turn.enable=true",
    ]
    with initialize_config_module("verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=[*base, *overrides])


class ScriptedServer:
    """Replays assistant turns: turn k of every request is `script[k]` (or `script(prompt, k)`).

    Each text is encoded and followed by the tokenizer's end-of-turn token, as a chat model
    would emit it. `emitted[request_id]` lists the token ids returned per turn (tests check the
    response mask against them); `calls` counts generate calls; `seconds` accumulates the time
    spent producing them and `slept` the simulated latency (`latency_s` per call), which
    benchmarks subtract to exclude generation.
    """

    def __init__(
        self,
        tokenizer,
        script: Script,
        *,
        eos_token: str = "<|im_end|>",
        with_logprobs: bool = False,
        latency_s: float = 0.0,
    ):
        self.tokenizer = tokenizer
        self.latency_s = latency_s  # simulated generation time per turn (an asyncio sleep)
        self.script = script
        self.eos_id = tokenizer.convert_tokens_to_ids(eos_token)
        self.with_logprobs = with_logprobs
        self._turn: dict[str, int] = defaultdict(int)
        self._encoded: dict[str, list[int]] = {}
        self.emitted: dict[str, list[list[int]]] = defaultdict(list)
        self.calls = 0
        self.seconds = 0.0  # time spent producing outputs (the simulated latency excluded)
        self.slept = 0.0  # simulated latency, summed over calls

    def _text(self, request_id: str, prompt_ids: list[int]) -> str:
        k = self._turn[request_id]
        self._turn[request_id] += 1
        if callable(self.script):
            return self.script(self.tokenizer.decode(prompt_ids), k)
        return self.script[min(k, len(self.script) - 1)]

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw):
        t0 = time.perf_counter()
        self.calls += 1
        text = self._text(request_id, prompt_ids)
        ids = self._encoded.get(text)
        if ids is None:
            ids = self._encoded[text] = self.tokenizer.encode(text, add_special_tokens=False) + [self.eos_id]
        self.emitted[request_id].append(list(ids))
        out = TokenOutput(token_ids=list(ids), log_probs=[-0.5] * len(ids) if self.with_logprobs else None)
        self.seconds += time.perf_counter() - t0
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
            self.slept += self.latency_s
        return out


class ModelServer:
    """Samples from a transformers causal LM (CPU); returns token ids and their log-probs."""

    def __init__(self, model, tokenizer, *, max_new_tokens: int = 48, seed: int = 0):
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self.rng = random.Random(seed)
        self.eos_ids = {tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.pad_token_id}
        self.emitted: dict[str, list[list[int]]] = defaultdict(list)
        self._lock = asyncio.Lock()

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw):
        async with self._lock:  # one forward pass at a time; the model is not re-entrant
            torch.manual_seed(self.rng.randrange(2**31))
            input_ids = torch.tensor([prompt_ids])
            with torch.no_grad():
                out = self.model.generate(
                    input_ids,
                    attention_mask=torch.ones_like(input_ids),
                    do_sample=True,
                    temperature=float(sampling_params.get("temperature") or 1.0),
                    top_k=0,
                    top_p=1.0,
                    max_new_tokens=self.max_new_tokens,
                    eos_token_id=sorted(self.eos_ids),
                    pad_token_id=self.tokenizer.pad_token_id,
                    output_scores=True,
                    return_dict_in_generate=True,
                )
            ids = out.sequences[0, input_ids.shape[1] :].tolist()
            logprobs = [
                float(torch.log_softmax(score[0].float(), dim=-1)[tok])
                for score, tok in zip(out.scores, ids, strict=False)
            ]
        self.emitted[request_id].append(ids)
        return TokenOutput(token_ids=ids, log_probs=logprobs)


def make_loop(
    config: Any,
    server: Any,
    tokenizer,
    *,
    agent_name: str = "astra_tool_agent",
    tools: list | None = None,
    context: RolloutContext | None = None,
) -> Any:
    """Instantiate a registered agent loop as `AgentLoopWorker._run_agent_loop` does; `context`
    (astra_tool_agent only) replaces the worker's own, e.g. to give it an instrumented sandbox."""
    extra = {} if context is None else {"context": context}
    return hydra.utils.instantiate(
        config=_agent_loop_registry[agent_name],
        trainer_config=DictConfigWrap(config=config),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type="qwen2",
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(config.data),
        tools=ToolListWrap(tools or []),
        **extra,
    )


def run(coro) -> Any:
    """Run a coroutine on verl's event loop (the loop agent loops were constructed on)."""
    return get_event_loop().run_until_complete(coro)


def close_worker_context() -> None:
    """Close the rollout context of verl's event loop (its sandbox pool, whatever its config), so the
    next agent loop built on that loop starts a fresh one."""
    context = drop_worker_context(get_event_loop())
    if context is not None:
        run(context.aclose())
