"""hf_cpu rollout engine (batched decoding) vs transformers' `generate()`, one request at a time and batched.

Competitors, what a backend built on transformers would do instead:
- `generate()` one request at a time (sampling, KV cache, its own token budget);
- `generate()` batched: the concurrent requests left-padded into one call (transformers does
  the padding masks and the batched KV cache itself), at the same batch sizes.
`HFEngine.generate_batch` left-pads the concurrent requests into one prefill and decodes them
together, dropping finished rows from the batch and the cache. Same model, same prompts, same
budgets, sampling on all sides, log-probs on all sides; all ignore EOS so every request decodes
its full budget (equal work).

Printed: generated tokens/s of each, per batch size, and the ratios.

    .venv/bin/python bench/hf_cpu_rollout.py [--hidden 128] [--layers 2] [--batch 1,8,32] [--tokens 64]
    .venv/bin/python bench/hf_cpu_rollout.py --quick     # what `make bench` runs
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch
from benchkit import Report, machine_line

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


def _batched(engine: HFEngine, requests: list[GenerationRequest]) -> int:
    """One `generate()` call for all requests: left-padded prompts, the same sampling and budget."""
    width = max(len(r.prompt_ids) for r in requests)
    ids = torch.zeros(len(requests), width, dtype=torch.long)
    mask = torch.zeros(len(requests), width, dtype=torch.long)
    for i, r in enumerate(requests):
        ids[i, width - len(r.prompt_ids) :] = torch.tensor(r.prompt_ids)
        mask[i, width - len(r.prompt_ids) :] = 1
    budget = requests[0].max_tokens
    assert all(r.max_tokens == budget for r in requests)
    out = engine.model.generate(
        ids,
        attention_mask=mask,
        do_sample=True,
        temperature=1.0,
        top_k=0,
        top_p=1.0,
        max_new_tokens=budget,
        min_new_tokens=budget,
        output_scores=True,
        return_dict_in_generate=True,
        pad_token_id=0,
    )
    return (out.sequences.shape[1] - width) * len(requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--batch", default="1,8,32")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per cell, median reported (default 3)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads, the same for every side (default 1: on a shared machine, OpenMP "
                             "threads spin while a sibling waits for a core)")  # fmt: skip
    parser.add_argument("--one-by-one-max", type=int, default=1 << 30,
                        help="skip one-at-a-time generate() above this batch size (it is the slow column)")  # fmt: skip
    parser.add_argument("--quick", action="store_true",
                        help="batches 8 and 32, 2 runs each, one-at-a-time only at 8 (make bench)")  # fmt: skip
    parser.add_argument("--json", metavar="PATH", help="write the summary rows as JSON")
    args = parser.parse_args()
    if args.quick:
        args.batch, args.repeat, args.one_by_one_max = "8,32", 2, 8
    torch.set_num_threads(args.threads)
    print(machine_line())
    report = Report("bench/hf_cpu_rollout.py")
    with tempfile.TemporaryDirectory() as tmp:
        path = build(tmp, hidden_size=args.hidden, num_layers=args.layers)
        engine = HFEngine(str(path), eos_token_ids=[])
        engine.generate_batch(_requests(2, 4, 16, engine.vocab_size))  # warm-up
        _batched(engine, _requests(2, 4, 16, engine.vocab_size))
        print(
            f"model hidden {args.hidden}, {args.layers} layers; {args.tokens} tokens per request, torch threads "
            f"{torch.get_num_threads()}; median of {args.repeat} runs per cell"
        )
        header = ("batch", "hf_cpu tok/s", "generate() 1 by 1", "vs 1 by 1", "generate() batched", "vs batched")
        print(" ".join(f"{h:>{w}}" for h, w in zip(header, (6, 14, 18, 10, 19, 11), strict=True)))
        for batch in (int(b) for b in args.batch.split(",")):
            requests = _requests(batch, args.tokens, args.prompt, engine.vocab_size)
            rates = {"ours": [], "seq": [], "batched": []}
            for _ in range(args.repeat):  # interleaved: load from other work hits all three alike
                start = time.perf_counter()
                results = engine.generate_batch(requests)
                rates["ours"].append(sum(len(r.token_ids) for r in results) / (time.perf_counter() - start))
                if batch <= args.one_by_one_max:
                    start = time.perf_counter()
                    rates["seq"].append(_sequential(engine, requests) / (time.perf_counter() - start))
                start = time.perf_counter()
                rates["batched"].append(_batched(engine, requests) / (time.perf_counter() - start))
            ours, batched = statistics.median(rates["ours"]), statistics.median(rates["batched"])
            seq = statistics.median(rates["seq"]) if rates["seq"] else None
            seq_cells = f"{seq:>18.0f} {ours / seq:>9.1f}x" if seq else f"{'-':>18} {'-':>10}"
            print(f"{batch:>6} {ours:>14.0f} {seq_cells} {batched:>19.0f} {ours / batched:>10.2f}x")
            if batch > 1:
                report.add(what=f"CPU rollout, {batch} concurrent requests x {args.tokens} tokens (tiny Qwen2)",
                           competitor="transformers `generate()`, the requests batched (left-padded)",
                           ours=f"{ours:,.0f} tok/s", theirs=f"{batched:,.0f} tok/s", ratio=f"{ours / batched:.2f}x")  # fmt: skip
    print(machine_line())
    report.write(args.json)


if __name__ == "__main__":
    main()
