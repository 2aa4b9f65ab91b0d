"""hf_cpu rollout engine (batched decoding) vs transformers' `generate()` one request at a time.

The competing approach is what a backend without batching would do: each agent-loop request runs
`model.generate(...)` alone (sampling, KV cache, its own token budget). `HFEngine.generate_batch`
left-pads the concurrent requests into one prefill and decodes them together, dropping finished
rows from the batch and the cache. Same model, same prompts, same budgets, sampling on both sides;
both ignore EOS so every request decodes its full budget (equal work).

Printed: generated tokens/s of each, per batch size, and the ratio.

    .venv/bin/python bench/hf_cpu_rollout.py [--hidden 128] [--layers 2] [--batch 1,8,32] [--tokens 64]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from astra_verl.platform.hf_engine import GenerationRequest, HFEngine
from astra_verl.platform.sampling import SamplingParams
from astra_verl.tiny_model import build


def _requests(batch: int, tokens: int, prompt_len: int, vocab: int) -> list[GenerationRequest]:
    g = torch.Generator().manual_seed(0)
    return [
        GenerationRequest(
            torch.randint(10, vocab, (prompt_len + 7 * i % 40,), generator=g).tolist(),
            SamplingParams(temperature=1.0, logprobs=True),
            tokens,
        )
        for i in range(batch)
    ]


def _sequential(engine: HFEngine, requests: list[GenerationRequest]) -> int:
    generated = 0
    for r in requests:
        ids = torch.tensor([r.prompt_ids])
        out = engine.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=r.max_tokens,
            min_new_tokens=r.max_tokens,
            output_scores=True,  # hf_cpu returns log-probs; make the baseline compute them too
            return_dict_in_generate=True,
            pad_token_id=0,
        )
        generated += out.sequences.shape[1] - ids.shape[1]
    return generated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", default="1,8,32")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = build(tmp, hidden_size=args.hidden, num_layers=args.layers)
        engine = HFEngine(str(path), eos_token_ids=[])
        engine.generate_batch(_requests(2, 4, 16, engine.vocab_size))  # warm-up
        print(
            f"model hidden {args.hidden}, {args.layers} layers; {args.tokens} tokens per request, torch threads "
            f"{torch.get_num_threads()}"
        )
        print(f"{'batch':>6} {'hf_cpu tok/s':>14} {'generate() tok/s':>18} {'ratio':>7}")
        for batch in (int(b) for b in args.batch.split(",")):
            requests = _requests(batch, args.tokens, args.prompt, engine.vocab_size)
            start = time.perf_counter()
            results = engine.generate_batch(requests)
            ours = sum(len(r.token_ids) for r in results) / (time.perf_counter() - start)
            start = time.perf_counter()
            theirs = _sequential(engine, requests) / (time.perf_counter() - start)
            print(f"{batch:>6} {ours:>14.0f} {theirs:>18.0f} {ours / theirs:>6.1f}x")


if __name__ == "__main__":
    main()
