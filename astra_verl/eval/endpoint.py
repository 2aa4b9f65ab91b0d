"""A policy behind an OpenAI-compatible endpoint, as the token server `astra_tool_agent` talks to.

The agent loop works on token ids (it builds the prompt with the checkpoint's chat template and
parses the generated tokens itself), so the endpoint is asked for a plain completion of the token
prompt (`/v1/completions`, `prompt` = the ids) and must return the ids it sampled (vLLM:
`return_token_ids`), through the LLM client (`astra_foundation.llm`: endpoint pool, retries,
concurrency). A chat endpoint would re-template the conversation and parse the calls itself:
another episode than the one training runs.

verl's sampling params map to the completions fields vLLM reads: `temperature`, `top_p`, `top_k`,
`repetition_penalty`, `stop_token_ids`, `seed`; `max_tokens` is verl's budget for its vLLM
server (the response length, capped by what is left of prompt + response). Log-probs are not
requested: an evaluation does not use them (the loop then keeps none).
"""

from __future__ import annotations

from typing import Any

from verl.workers.rollout.replica import TokenOutput

from astra_foundation.llm import LLMClient

_PASSED = ("temperature", "top_p", "top_k", "repetition_penalty", "seed")
_IGNORED = ("logprobs",)


class EndpointServer:
    """`generate(request_id, prompt_ids, sampling_params)` -> `TokenOutput`, answered by `client`."""

    def __init__(self, client: LLMClient, *, prompt_length: int, response_length: int, step: str = "eval.envs"):
        self.client = client
        self.prompt_length = prompt_length
        self.response_length = response_length
        self.step = step

    def fields(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> dict[str, Any]:
        """The completions request's sampling fields for verl's `sampling_params`."""
        unknown = sorted(set(sampling_params) - {*_PASSED, *_IGNORED, "stop_token_ids", "max_tokens"})
        if unknown:
            raise ValueError(f"endpoint policy: unsupported sampling parameter(s) {unknown}")
        budget = min(self.response_length, self.prompt_length + self.response_length - len(prompt_ids))
        if budget < 1:
            raise ValueError(f"endpoint policy: a prompt of {len(prompt_ids)} tokens leaves no response budget")
        fields = {k: sampling_params[k] for k in _PASSED if sampling_params.get(k) is not None}
        fields["max_tokens"] = int(sampling_params.get("max_tokens") or budget)
        if sampling_params.get("stop_token_ids"):
            fields["stop_token_ids"] = list(sampling_params["stop_token_ids"])
        return fields

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw):
        # no response cache: every episode's turn is its own sample (resuming is the results file's job)
        completion = await self.client.complete_tokens(
            list(prompt_ids), step=self.step, use_cache=False, **self.fields(prompt_ids, sampling_params)
        )
        stop = "completed" if completion.finish_reason in ("stop", "length", None) else "aborted"
        return TokenOutput(token_ids=completion.token_ids, log_probs=None, stop_reason=stop)

    async def aclose(self) -> None:
        await self.client.aclose()
