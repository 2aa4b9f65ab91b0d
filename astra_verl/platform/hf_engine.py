"""The `hf_cpu` rollout backend's engine: a transformers causal LM that decodes batches of token prompts.

Synchronous and single-threaded by design: `HFRolloutServer` (hf_rollout.py) runs every call on one
worker thread, so a batch and a weight update never overlap. One `generate_batch` call decodes a
static batch: the prompts are left-padded into one prefill, then every row advances one token per
step with its own sampling params (sampling.py) until it stops (EOS, a stop token, its token budget,
or an abort); finished rows leave the batch and the KV cache so late rows do not pay for them.

Weights arrive from the trainer as (name, tensor) buckets (`load_weights`), named like the
HuggingFace state dict. `finish_weight_update` insists that every parameter was written since
`begin_weight_update`, so a partial sync is an error, never a silently stale model, and returns a
checksum of the weights that the trainer side can compare with its own (`weights_checksum`).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache

from astra_verl.platform.sampling import SamplingParams, sample_next

logger = logging.getLogger(__name__)


@dataclass
class GenerationRequest:
    prompt_ids: list[int]
    params: SamplingParams
    max_tokens: int


@dataclass
class GenerationResult:
    token_ids: list[int]
    log_probs: list[float] | None
    finish_reason: str  # "stop" (EOS / stop token), "length" (token budget) or "abort"


def weights_checksum(named_tensors: Iterable[tuple[str, torch.Tensor]]) -> str:
    """sha256 over names and float32 bytes, in name order; equal weights give equal checksums on any side."""
    digest = hashlib.sha256()
    for name, tensor in sorted(named_tensors, key=lambda item: item[0]):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()[:16]


def torch_dtype(name: str) -> torch.dtype:
    dtypes = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16}
    dtypes |= {"float16": torch.float16, "fp16": torch.float16}
    if name not in dtypes:
        raise ValueError(f"hf_cpu rollout: unsupported dtype {name!r}; use one of {sorted(dtypes)}")
    return dtypes[name]


class HFEngine:
    """Owns the model; not thread-safe (the server calls it from one thread)."""

    def __init__(
        self,
        model_path: str,
        *,
        dtype: str = "float32",
        load_format: str = "auto",
        eos_token_ids: Sequence[int] = (),
        logprobs_mode: str = "processed_logprobs",
        trust_remote_code: bool = False,
        attn_implementation: str = "sdpa",
    ) -> None:
        self.dtype = torch_dtype(dtype)
        self.logprobs_mode = logprobs_mode
        self.eos_token_ids = frozenset(int(t) for t in eos_token_ids)
        config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
        kwargs = {
            "dtype": self.dtype,
            "trust_remote_code": trust_remote_code,
            "attn_implementation": attn_implementation,
        }
        if load_format == "dummy":
            # verl's default for hybrid rollouts: random weights now, the trainer's real ones at the first sync.
            self.model = AutoModelForCausalLM.from_config(config, **kwargs)
        else:
            self.model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs)
        self.model.eval().requires_grad_(False)
        self._abort = threading.Event()
        self._pending_names: set[str] | None = None
        self._released = False
        self._ready = True  # False from release_weights until the next complete weight update
        self._shapes: dict[int, torch.Size] = {}
        self._params = self._named_storage()

    # ------------------------------------------------------------------ weights

    def _named_storage(self) -> dict[str, torch.Tensor]:
        # state_dict(keep_vars) lists parameters, persistent buffers and tied aliases
        # (lm_head.weight and embed_tokens.weight are one Parameter when embeddings are tied).
        return dict(self.model.state_dict(keep_vars=True))

    def _parameter_names(self) -> dict[int, str]:
        """One name per distinct Parameter (the first state_dict lists): what a full update must cover."""
        names: dict[int, str] = {}
        for name, tensor in self._params.items():
            if isinstance(tensor, torch.nn.Parameter):
                names.setdefault(id(tensor), name)
        return names

    def begin_weight_update(self) -> None:
        self._pending_names = set(self._parameter_names().values())

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        if self._pending_names is None:
            raise RuntimeError("hf_cpu rollout: load_weights outside begin_weight_update/finish_weight_update")
        if not self.has_weights:
            raise RuntimeError("hf_cpu rollout: load_weights while the weights are released; wake_up first")
        canonical = self._parameter_names()
        count = 0
        with torch.no_grad():
            for name, tensor in weights:
                target = self._params.get(name)
                if target is None:
                    raise KeyError(
                        f"hf_cpu rollout: the trainer sent weight {name!r}, which the rollout model does not have "
                        f"(it has e.g. {sorted(self._params)[:3]}); are actor and rollout the same architecture?"
                    )
                if tuple(target.shape) != tuple(tensor.shape):
                    raise ValueError(
                        f"hf_cpu rollout: weight {name!r} has shape {tuple(tensor.shape)} from the trainer, "
                        f"{tuple(target.shape)} in the rollout model"
                    )
                target.copy_(tensor.to(target.dtype))
                self._pending_names.discard(canonical.get(id(target), name))
                count += 1
        return count

    def finish_weight_update(self) -> str:
        missing, self._pending_names = self._pending_names, None
        if missing is None:
            raise RuntimeError("hf_cpu rollout: finish_weight_update without begin_weight_update")
        if missing:
            raise RuntimeError(
                f"hf_cpu rollout: weight update incomplete, {len(missing)} parameter(s) not sent: {sorted(missing)[:5]}"
            )
        self._ready = True
        return self.checksum()

    def tensor(self, name: str) -> torch.Tensor:
        return self._params[name].detach()

    def checksum(self) -> str:
        return weights_checksum((name, self._params[name]) for name in self._parameter_names().values())

    def release_weights(self) -> None:
        """Free the parameters' memory (hybrid sleep, like vLLM's level-2 sleep); buffers stay.

        Only a complete weight update (after `allocate_weights`) makes the model usable again.
        """
        if not self.has_weights:
            return
        for param in self.model.parameters():
            self._shapes[id(param)] = param.shape
            param.data = torch.empty(0, dtype=param.dtype)
        self._released = True
        self._ready = False

    def allocate_weights(self) -> None:
        """Re-allocate uninitialised parameter storage after release_weights, for a full weight update."""
        if self.has_weights:
            return
        for param in self.model.parameters():
            param.data = torch.empty(self._shapes[id(param)], dtype=param.dtype)
        self._released = False

    @property
    def vocab_size(self) -> int:
        return self.model.get_input_embeddings().num_embeddings

    @property
    def has_weights(self) -> bool:
        return not self._released

    # ------------------------------------------------------------------ generation

    def abort(self) -> None:
        self._abort.set()

    def clear_abort(self) -> None:
        self._abort.clear()

    def _finish_reason(self, request: GenerationRequest, token: int, generated: int, aborted: bool) -> str | None:
        """Why a row stops after `token` ("stop", "length", "abort"), or None to go on."""
        p = request.params
        if token in p.stop_token_ids or (not p.ignore_eos and token in self.eos_token_ids):
            return "stop"
        if generated >= request.max_tokens:
            return "length"
        return "abort" if aborted else None

    @torch.no_grad()
    def generate_batch(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Decode a batch until every row stopped. One loop over a shrinking batch, kept in one
        function (over 60 lines) because the KV cache, the live rows, the attention mask and the
        penalty state are pruned together at each step; splitting it would pass them all around."""
        if not requests:
            return []
        if not self._ready or self._pending_names is not None:
            raise RuntimeError(
                "hf_cpu rollout: generate called while the weights are released or mid-update (replica asleep?)"
            )
        rows = list(range(len(requests)))  # request index of each live batch row
        input_ids, attention = _left_padded([r.prompt_ids for r in requests])
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        seen = None
        if any(r.params.repetition_penalty != 1.0 for r in requests):
            seen = torch.zeros((len(requests), self.vocab_size), dtype=torch.bool)
            seen.scatter_(1, input_ids, attention.bool())
        generators = [
            torch.Generator().manual_seed(r.params.seed) if r.params.seed is not None else None for r in requests
        ]

        out_tokens: list[list[int]] = [[] for _ in requests]
        out_logprobs: list[list[float]] = [[] for _ in requests]
        reasons: list[str | None] = [None] * len(requests)

        cache = DynamicCache()
        step_ids, step_pos = input_ids, positions
        while rows:
            logits = self.model(
                input_ids=step_ids,
                attention_mask=attention,
                position_ids=step_pos,
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            ).logits[:, -1, :]
            params = [requests[r].params for r in rows]
            tokens, logprobs = sample_next(
                logits, params, seen, [generators[r] for r in rows], logprobs_mode=self.logprobs_mode
            )
            keep = []
            aborted = self._abort.is_set()
            for b, r in enumerate(rows):
                token = int(tokens[b])
                out_tokens[r].append(token)
                out_logprobs[r].append(float(logprobs[b]))
                reasons[r] = self._finish_reason(requests[r], token, len(out_tokens[r]), aborted)
                if reasons[r] is None:
                    keep.append(b)
            if len(keep) < len(rows):
                if not keep:
                    break
                index = torch.tensor(keep)
                cache.batch_select_indices(index)
                attention, tokens, step_pos = attention[index], tokens[index], step_pos[index]
                if seen is not None:
                    seen = seen[index]
                rows = [rows[b] for b in keep]
            if seen is not None:
                seen[torch.arange(len(rows)), tokens] = True
            step_ids = tokens.unsqueeze(1)
            step_pos = step_pos[:, -1:] + 1
            attention = torch.cat([attention, torch.ones((len(rows), 1), dtype=attention.dtype)], dim=1)

        return [
            GenerationResult(
                token_ids=out_tokens[i],
                log_probs=out_logprobs[i] if req.params.logprobs else None,
                finish_reason=reasons[i] or "abort",
            )
            for i, req in enumerate(requests)
        ]


def _left_padded(prompts: Sequence[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, attention mask) of prompts left-padded to the longest (pad id 0, masked out)."""
    longest = max(len(p) for p in prompts)
    input_ids = torch.zeros((len(prompts), longest), dtype=torch.long)
    attention = torch.zeros((len(prompts), longest), dtype=torch.long)
    for i, ids in enumerate(prompts):
        input_ids[i, longest - len(ids) :] = torch.tensor(ids)
        attention[i, longest - len(ids) :] = 1
    return input_ids, attention
