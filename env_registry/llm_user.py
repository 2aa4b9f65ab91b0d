"""A simulated user over an OpenAI-compatible endpoint: the one piece the LLM users share.

Three users are worded by a model: τ-bench's (`astra_verl.benchmarks.tau_hook`, the `tau_user`
hook), the missing-value environments' (`astra_verl.rollout.hooks.LLMUserTurnsHook`,
`llm_user_turns`) and trajectory synthesis's missing-value user (`data_synth.traj.variants`). All
hold the conversation with roles swapped (the agent's messages are the model's "user" turns, the
model's own lines its "assistant" turns). The hooks open one client per episode, closed at its
end; synthesis lends the pipeline's client (cached: a rerun replays the user's words). It lives
here, under both the verl plugin and the pipelines, because neither may import the other.

`MISSING_VALUE_USER_PROMPT` is the system prompt of a missing-value environment's user: it asked
the question, knows exactly the value the question leaves out, and nothing else.
"""

from __future__ import annotations

from typing import Any

MISSING_VALUE_USER_PROMPT = """You are a user talking to an AI assistant. You asked it this question:

{question}

Your question left out {missing}. You know it exactly: it is {value}. That is the only fact you know.

Rules:
- When the assistant asks for {missing} (or for something that is exactly {value}), give it: {value}.
- When it asks you anything else, say that you do not know.
- Never solve the task, never compute, look up or guess anything, never answer your own question.
- Reply in one or two short sentences, as the user; do not act as the assistant."""


def missing_value_prompt(question: str, missing: str, value: str) -> str:
    """The system prompt of a missing-value environment's LLM user (see the module docstring)."""
    return MISSING_VALUE_USER_PROMPT.format(question=question, missing=missing, value=value)


class RoleSwappedChat:
    """A user model's side of one episode: `system`, then `opening` (its first messages, already in
    its roles), then each agent message as "user" and each reply as "assistant". `step` names the
    requests in the client's logs."""

    def __init__(
        self,
        system: str,
        base_url: str,
        model: str,
        *,
        step: str,
        opening: tuple[dict[str, Any], ...] = (),
        max_tokens: int | None = None,
        timeout_s: float = 120.0,
        client: Any = None,
    ):
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}, *opening]
        self.step = step
        # A lent client (an `LLMClient`, `base_url` and `model` then unused) stays its owner's, and its
        # cache answers a rerun; an own one is not cached (a user's line is a sample, not a fact).
        self.borrowed = client is not None
        self.client = client if client is not None else self._own_client(base_url, model, max_tokens, timeout_s)

    @staticmethod
    def _own_client(base_url: str, model: str, max_tokens: int | None, timeout_s: float) -> Any:
        # One client per episode: a cached one would outlive the event loop it was made on.
        from astra_foundation.llm import LLMConfig, build_client, split_urls  # lazy: only rows with an LLM user need it

        budget = {} if max_tokens is None else {"max_tokens": max_tokens}  # None: LLMConfig's default
        return build_client(
            LLMConfig(base_urls=split_urls(base_url), model=model, cache=False, timeout_s=timeout_s, **budget)
        )

    async def reply(self, agent_message: str | None) -> str:
        """The model's next line after `agent_message` (None: it speaks first)."""
        if agent_message is not None:
            self.messages.append({"role": "user", "content": agent_message})
        turn = sum(1 for m in self.messages if m["role"] == "assistant")
        completion = await self.client.complete(
            list(self.messages), step=self.step, sample=turn, use_cache=self.borrowed
        )
        text = completion.text or ""
        self.messages.append({"role": "assistant", "content": text})
        return text

    async def aclose(self) -> None:
        if not self.borrowed:  # a lent client is closed by its owner
            await self.client.aclose()
