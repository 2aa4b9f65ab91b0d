"""Sampling for the `hf_cpu` rollout backend: verl's sampling-params dict in, one token per row out.

verl's agent loops send vLLM-style parameters (`temperature`, `top_p`, `top_k`, `repetition_penalty`,
`logprobs`, `stop_token_ids`, optionally `max_tokens` / `max_new_tokens`, `ignore_eos`, `seed`);
`SamplingParams.from_request` reads exactly those and rejects anything else by name, so a parameter
this backend would silently ignore is an error instead. Semantics follow vLLM's: temperature 0 is
greedy, `top_k` <= 0 and `top_p` = 1 disable the filter, the repetition penalty divides positive and
multiplies negative logits of every token already in prompt or output, and the returned log-prob is
of the sampled token under the processed distribution (`processed_logprobs`, verl's default
`rollout.logprobs_mode`: after penalty, temperature, top-k and top-p) or the raw one (`raw_logprobs`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

LOGPROBS_MODES = ("processed_logprobs", "raw_logprobs")


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    repetition_penalty: float = 1.0
    max_tokens: int | None = None
    stop_token_ids: frozenset[int] = field(default_factory=frozenset)
    ignore_eos: bool = False
    logprobs: bool = False
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @classmethod
    def from_request(cls, params: dict[str, Any]) -> SamplingParams:
        """Validate one request's sampling params; raises ValueError naming the bad key."""
        known = {
            "temperature",
            "top_p",
            "top_k",
            "repetition_penalty",
            "max_tokens",
            "max_new_tokens",
            "stop_token_ids",
            "ignore_eos",
            "logprobs",
            "seed",
        }
        unknown = sorted(set(params) - known)
        if unknown:
            raise ValueError(f"hf_cpu rollout: unsupported sampling parameter(s) {unknown}; supported: {sorted(known)}")
        if "max_tokens" in params and "max_new_tokens" in params:
            raise ValueError("hf_cpu rollout: give max_tokens or max_new_tokens, not both")
        max_tokens = params.get("max_tokens", params.get("max_new_tokens"))
        temperature = float(params.get("temperature", 1.0))
        top_p = float(params.get("top_p", 1.0))
        top_k = int(params.get("top_k", -1))
        penalty = float(params.get("repetition_penalty", 1.0))
        if not (temperature >= 0 and math.isfinite(temperature)):
            raise ValueError(f"hf_cpu rollout: temperature must be a finite number >= 0, got {temperature}")
        if not 0 < top_p <= 1:
            raise ValueError(f"hf_cpu rollout: top_p must be in (0, 1], got {top_p}")
        if not (penalty > 0 and math.isfinite(penalty)):
            raise ValueError(f"hf_cpu rollout: repetition_penalty must be > 0, got {penalty}")
        if max_tokens is not None and int(max_tokens) < 1:
            raise ValueError(f"hf_cpu rollout: max_tokens must be >= 1, got {max_tokens}")
        stop = params.get("stop_token_ids") or []
        seed = params.get("seed")
        return cls(
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            repetition_penalty=penalty,
            max_tokens=None if max_tokens is None else int(max_tokens),
            stop_token_ids=frozenset(int(t) for t in stop),
            ignore_eos=bool(params.get("ignore_eos", False)),
            logprobs=bool(params.get("logprobs", False)),
            seed=None if seed is None else int(seed),
        )


def apply_repetition_penalty(logits: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor) -> torch.Tensor:
    """logits [B, V]; seen [B, V] bool (token occurred in prompt or output); penalty [B]."""
    p = penalty.unsqueeze(1)
    penalized = torch.where(logits > 0, logits / p, logits * p)
    return torch.where(seen & (p != 1.0), penalized, logits)


def filter_top_k_top_p(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Mask (to -inf) what per-row top-k / top-p exclude; top_k <= 0 and top_p >= 1 keep everything.

    Ties at the cut are resolved by sort order, as in vLLM; the most likely token is always kept.
    """
    vocab = logits.shape[-1]
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    ranks = torch.arange(vocab, device=logits.device).unsqueeze(0)
    k = torch.where(top_k > 0, top_k.clamp(max=vocab), torch.full_like(top_k, vocab)).unsqueeze(1)
    drop = ranks >= k
    probs = sorted_logits.masked_fill(drop, float("-inf")).softmax(dim=-1)
    before = probs.cumsum(dim=-1) - probs  # mass strictly before each token
    drop |= before >= top_p.unsqueeze(1)
    drop[:, 0] = False
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.empty_like(logits).scatter_(-1, order, sorted_logits)


def sample_next(
    logits: torch.Tensor,
    params: Sequence[SamplingParams],
    seen: torch.Tensor | None,
    generators: Sequence[torch.Generator | None],
    logprobs_mode: str = "processed_logprobs",
) -> tuple[torch.Tensor, torch.Tensor]:
    """One decoding step for a batch: (token ids [B], log-probs of those tokens [B]).

    logits [B, V] are the model's last-position logits (any dtype; computed in float32).
    """
    if logprobs_mode not in LOGPROBS_MODES:
        raise ValueError(f"hf_cpu rollout: logprobs_mode must be one of {LOGPROBS_MODES}, got {logprobs_mode!r}")
    raw = logits.float()
    device = raw.device
    penalty = torch.tensor([p.repetition_penalty for p in params], device=device)
    processed = apply_repetition_penalty(raw, seen, penalty) if seen is not None else raw
    temperature = torch.tensor([p.temperature if not p.greedy else 1.0 for p in params], device=device)
    processed = processed / temperature.unsqueeze(1)
    if any(p.top_k > 0 or p.top_p < 1 for p in params):
        top_k = torch.tensor([p.top_k for p in params], device=device)
        top_p = torch.tensor([p.top_p for p in params], device=device)
        processed = filter_top_k_top_p(processed, top_k, top_p)

    tokens = processed.argmax(dim=-1)
    sampled = [row for row, p in enumerate(params) if not p.greedy]
    if sampled:
        probs = processed[sampled].softmax(dim=-1)
        unseeded = [i for i, row in enumerate(sampled) if generators[row] is None]
        if unseeded:
            draws = torch.multinomial(probs[unseeded], 1).squeeze(1)
            tokens[[sampled[i] for i in unseeded]] = draws
        for i, row in enumerate(sampled):
            if generators[row] is not None:
                tokens[row] = torch.multinomial(probs[i], 1, generator=generators[row]).squeeze(0)
    source = processed if logprobs_mode == "processed_logprobs" else raw
    token_logprobs = source.log_softmax(dim=-1).gather(-1, tokens.unsqueeze(1)).squeeze(1)
    return tokens, token_logprobs
