"""A simulated user over an OpenAI-compatible endpoint: the one piece the LLM users share.

Two hooks word a user with a model: τ-bench's (`astra_verl.benchmarks.tau_hook`, the `tau_user`
hook) and the missing-value environments' (`astra_verl.rollout.hooks.LLMUserTurnsHook`,
`llm_user_turns`). Both hold the conversation with roles swapped (the agent's messages are the
model's "user" turns, the model's own lines its "assistant" turns) and open one client per
episode, closed at its end.

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


def endpoints(base_url: str) -> list[str]:
    """The replicas of a `--user-base-url` (comma-separated, as every endpoint flag)."""
    return [u.strip() for u in base_url.split(",") if u.strip()]


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
    ):
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": system}, *opening]
        self.step = step
        # One client per episode: a cached one would outlive the event loop it was made on.
        from astra_foundation.llm import LLMConfig, build_client  # lazy: only rows with an LLM user need it

        budget = {} if max_tokens is None else {"max_tokens": max_tokens}  # None: LLMConfig's default
        self.client = build_client(
            LLMConfig(base_urls=endpoints(base_url), model=model, cache=False, timeout_s=timeout_s, **budget)
        )

    async def reply(self, agent_message: str | None) -> str:
        """The model's next line after `agent_message` (None: it speaks first)."""
        if agent_message is not None:
            self.messages.append({"role": "user", "content": agent_message})
        turn = sum(1 for m in self.messages if m["role"] == "assistant")
        completion = await self.client.complete(list(self.messages), step=self.step, sample=turn, use_cache=False)
        text = completion.text or ""
        self.messages.append({"role": "assistant", "content": text})
        return text

    async def aclose(self) -> None:
        await self.client.aclose()
