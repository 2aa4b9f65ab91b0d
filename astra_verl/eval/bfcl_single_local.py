"""A local checkpoint answering `bfcl-single`'s chat requests, without a server (`--model-path`).

What a `vllm serve CKPT --enable-auto-tool-choice --tool-call-parser hermes` would answer, made
from the parts the CPU rollout already has: the checkpoint's chat template renders the messages
and the request's tools (`apply_chat_template(messages, tools=...)`), `hf_cpu`'s engine
(`astra_verl.platform.hf_engine.HFEngine`: transformers, batched decoding) generates, and the
text's `<tool_call>` blocks (`HermesCalls`) become the reply's tool calls. As vLLM's hermes
parser does, a reply with a block that does not parse has no tool calls: its whole text is the
content. Requests arriving together are decoded as one batch (up to `batch`).

A prompt that leaves fewer than `max_tokens` tokens of the model's context raises
`ContextOverflow` (the entry becomes an error record, as a server's 400 would make it).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from astra_foundation.llm.types import Completion, ToolCall, Usage


class ContextOverflow(RuntimeError):
    """The prompt does not leave `max_tokens` of the model's context."""


@dataclass
class _Pending:
    ids: list[int]
    future: asyncio.Future = field(repr=False)


class LocalModel:
    """`await ask(messages, tools)` -> `Completion`, from the checkpoint at `model_path`."""

    def __init__(self, model_path: str, *, max_tokens: int, temperature: float, batch: int = 8, seed: int = 0):
        # heavy imports here: the CLI module and --help must not load torch
        from transformers import AutoConfig, AutoTokenizer, GenerationConfig

        from astra_verl.platform.hf_engine import HFEngine
        from astra_verl.rollout.call_parsing import HermesCalls

        self.tokenizer = AutoTokenizer.from_pretrained(model_path)
        eos = _eos_ids(GenerationConfig, model_path, self.tokenizer)
        self.engine = HFEngine(model_path, eos_token_ids=eos)
        self.context = int(getattr(AutoConfig.from_pretrained(model_path), "max_position_embeddings", 0) or 0)
        self.parser = HermesCalls()
        self.parser.tokenizer = self.tokenizer
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        self.batch = max(1, batch)
        self._pending: list[_Pending] = []
        self._worker: asyncio.Task | None = None

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
        ids = self.tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=True)
        ids = list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
        if self.context and len(ids) + self.max_tokens > self.context:
            raise ContextOverflow(
                f"a prompt of {len(ids)} tokens plus max_tokens {self.max_tokens} exceeds the model's "
                f"context of {self.context} tokens"
            )
        return ids

    async def ask(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Completion:
        pending = _Pending(self.prompt_ids(messages, tools), asyncio.get_running_loop().create_future())
        self._pending.append(pending)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._drain())
        return await pending.future

    async def _drain(self) -> None:
        from astra_verl.platform.hf_engine import GenerationRequest
        from astra_verl.platform.sampling import SamplingParams

        params = SamplingParams(temperature=self.temperature, seed=self.seed)
        while self._pending:
            await asyncio.sleep(0)  # let requests made in the same tick join the batch
            batch, self._pending = self._pending[: self.batch], self._pending[self.batch :]
            requests = [GenerationRequest(p.ids, params, self.max_tokens) for p in batch]
            try:
                results = await asyncio.to_thread(self.engine.generate_batch, requests)
            except Exception as exc:  # noqa: BLE001 - handed to every waiting request
                for p in batch:
                    if not p.future.done():
                        p.future.set_exception(exc)
                continue
            for p, result in zip(batch, results, strict=True):
                if not p.future.done():
                    p.future.set_result(self.completion(p.ids, result.token_ids, result.finish_reason))

    def completion(self, prompt_ids: list[int], token_ids: list[int], finish_reason: str) -> Completion:
        text = self.parser.decode(token_ids)
        turn = self.parser.parse_text(text)
        usage = Usage(prompt_tokens=len(prompt_ids), completion_tokens=len(token_ids))
        if not turn.calls or not all(c.ok for c in turn.calls):
            return Completion(text=text.strip(), finish_reason=finish_reason, usage=usage, model="local")
        calls = [
            ToolCall(id=f"call_{i}", name=c.name or "", arguments=json.dumps(c.arguments, ensure_ascii=False))
            for i, c in enumerate(turn.calls)
        ]
        return Completion(text=turn.content, tool_calls=calls, finish_reason=finish_reason, usage=usage, model="local")


def _eos_ids(generation_config: Any, model_path: str, tokenizer: Any) -> list[int]:
    """The end-of-turn ids: the generation config's, else the tokenizer's."""
    try:
        eos = generation_config.from_pretrained(model_path).eos_token_id
    except OSError:  # no generation_config.json
        eos = None
    if eos is None:
        eos = tokenizer.eos_token_id
    return [eos] if isinstance(eos, int) else [int(t) for t in eos or ()]
