"""The LLM client every synthesis step uses: cache, bounded concurrency, retries, JSON replies.

    client = LLMClient(backend, model="qwen3-32b", cache=ResponseCache(run_dir / "llm_cache.sqlite"))
    c = await client.complete(messages, step="env.decompose", sample=0, tools=None, temperature=0.7)
    r = await client.complete_json(messages, step="env.verify", schema=Verdict)   # r.value: Verdict

`complete` looks the request up in the cache first (a hit costs no request and no slot), then
sends it through the backend under a semaphore of `max_concurrency`, retrying
`TransientError` up to `max_retries` times with exponential backoff and full jitter, never
sooner than a server's Retry-After. It returns a `Completion` or raises `LLMUnavailable`.
Identical cacheable requests in flight at the same time are sent once and share the answer
(counted as cache hits): a concurrent run then sends what a sequential run would and every
caller of one cache key sees the same sample. The shared request is cancelled only when all
its callers are.

`complete_json` extracts JSON from the reply (fences and `<think>` tolerated), validates it
against a pydantic model and an optional `check` callable, and on failure asks once more,
showing the model its reply and what was wrong ("repair round"). A second failure raises
`LLMOutputError(reason="<step>:<kind>")`, which the pipeline records as a rejection.

Usage is counted per step (`client.usage`) and per record: `usage_scope()` opens a counter
that every call made inside it (including in tasks it spawns) adds to; the pipeline runner
opens one per record and stores it in the record's metadata.

One client belongs to one event loop (its semaphore and HTTP connections are bound to it).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from astra_foundation.llm.cache import ResponseCache, cache_key
from astra_foundation.llm.extract import ReplyError, extract_json
from astra_foundation.llm.types import (
    Completion,
    LLMOutputError,
    LLMUnavailable,
    StepUsage,
    TokenCompletion,
    TransientError,
)

T = TypeVar("T")

_RECORD_USAGE: contextvars.ContextVar[StepUsage | None] = contextvars.ContextVar("record_usage", default=None)

REPAIR_MESSAGE = (
    "Your previous reply could not be used: {error}\n"
    "Reply again with the complete answer as one JSON {shape} and nothing else."
)


class Backend(Protocol):
    """What the client needs from a transport: send one chat-completion request."""

    name: str

    async def send(self, payload: dict[str, Any], *, step: str) -> tuple[dict[str, Any], str | None]:
        """Return (chat.completion body, label of the endpoint that answered). Raise
        `TransientError` for what is worth retrying and `LLMUnavailable` for what is not.
        A backend that also serves token prompts (`complete_tokens`) takes `route="completions"`."""

    async def aclose(self) -> None: ...


@contextlib.contextmanager
def usage_scope() -> Iterator[StepUsage]:
    """Count every LLM call made inside the block (and in tasks started from it)."""
    usage = StepUsage()
    token = _RECORD_USAGE.set(usage)
    try:
        yield usage
    finally:
        _RECORD_USAGE.reset(token)


@dataclass
class JSONReply(Generic[T]):
    value: T
    completion: Completion
    repaired: bool = False
    completions: list[Completion] = field(default_factory=list)


class _Flight:
    """One request in flight and the number of callers waiting on it. It runs as its own task
    (counted in its first caller's usage scope), so one caller's cancellation does not cancel
    the others' answer; the last caller to leave cancels it."""

    def __init__(self, task: asyncio.Future):
        self.task = task
        self.waiters = 0

    async def join(self) -> Completion:
        self.waiters += 1
        try:
            return await asyncio.shield(self.task)
        finally:
            self.waiters -= 1
            if not self.waiters and not self.task.done():
                self.task.cancel()


def _validation_summary(e: ValidationError, limit: int = 4) -> str:
    parts = []
    for err in e.errors()[:limit]:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
        parts.append(f"{loc}: {err.get('msg')}")
    more = len(e.errors()) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


@dataclass(frozen=True)
class _Kind:
    """A kind of request: how it is sent (the backend's route) and how its answer is read."""

    route: str | None  # None: the backend's default (chat completions), as every backend serves it
    parse: Callable[..., Any]

    async def send(self, backend: Backend, payload: dict[str, Any], step: str) -> tuple[dict[str, Any], str | None]:
        if self.route is None:
            return await backend.send(payload, step=step)
        return await backend.send(payload, step=step, route=self.route)  # type: ignore[call-arg]


_CHAT = _Kind(None, Completion.from_response)
_TOKENS = _Kind("completions", TokenCompletion.from_response)


class LLMClient:
    def __init__(
        self,
        backend: Backend,
        *,
        model: str,
        cache: ResponseCache | None = None,
        max_concurrency: int = 32,
        max_retries: int = 6,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        max_retry_after_s: float = 300.0,
        defaults: dict[str, Any] | None = None,
        seed: int | None = None,
    ):
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.backend = backend
        self.model = model
        self.cache = cache
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.max_retry_after_s = max_retry_after_s
        self.defaults = dict(defaults or {})
        self._slots = asyncio.Semaphore(max_concurrency)
        self._flights: dict[str, _Flight] = {}
        self._rng = random.Random(seed)
        self.usage: dict[str, StepUsage] = defaultdict(StepUsage)

    # -- requests --------------------------------------------------------------------------
    def request(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        **params: Any,
    ) -> dict[str, Any]:
        """The chat-completion payload that would be sent (and that keys the cache)."""
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        payload.update(self.defaults)
        payload.update({k: v for k, v in params.items() if v is not None})
        if tools:
            payload["tools"] = tools
            if tool_choice is not None:
                payload["tool_choice"] = tool_choice
        payload.pop("stream", None)
        return payload

    def _count(self, step: str, **deltas: int) -> None:
        targets = [self.usage[step]]
        record = _RECORD_USAGE.get()
        if record is not None:
            targets.append(record)
        for usage in targets:
            for name, d in deltas.items():
                setattr(usage, name, getattr(usage, name) + d)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        delay = self._rng.uniform(0, min(self.backoff_max_s, self.backoff_base_s * 2**attempt))
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_retry_after_s))
        return delay

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        step: str,
        sample: int = 0,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        use_cache: bool = True,
        **params: Any,
    ) -> Completion:
        """One chat completion. `sample` distinguishes repeated samples of the same prompt."""
        payload = self.request(messages, tools=tools, tool_choice=tool_choice, **params)
        return await self._answer(payload, step, sample, use_cache, _CHAT)

    async def complete_tokens(
        self, prompt_ids: list[int], *, step: str, sample: int = 0, use_cache: bool = True, **params: Any
    ) -> TokenCompletion:
        """One completion of a token prompt (`/completions`: token ids in, the sampled token ids out), for
        a policy a token-level agent loop drives. `params`: the server's sampling fields (`max_tokens`,
        `temperature`, `top_p`, vLLM's `top_k`, `stop_token_ids`, `seed` ...)."""
        payload: dict[str, Any] = {"model": self.model, "prompt": list(prompt_ids)}
        payload.update(self.defaults)
        payload.update({k: v for k, v in params.items() if v is not None})
        payload["return_token_ids"] = True
        return await self._answer(payload, step, sample, use_cache, _TOKENS)

    async def _answer(self, payload: dict[str, Any], step: str, sample: int, use_cache: bool, kind: _Kind) -> Any:
        """From the cache, a request in flight with the same key, or a new request."""
        if self.cache is None or not use_cache:
            return await self._fetch(payload, step, None, kind)
        key = cache_key(payload, sample)
        body = self.cache.get(key)
        if body is not None:
            try:
                return self._shared(kind.parse(body, endpoint=None, cached=True, latency_s=0.0), step)
            except ValueError:
                pass  # an entry this version cannot read: ask again (the new answer is not stored over it)
        flight = self._flights.get(key)
        if flight is not None and not flight.task.done():
            return self._shared(await flight.join(), step)
        flight = self._flights[key] = _Flight(asyncio.ensure_future(self._fetch(payload, step, key, kind)))

        def landed(_: asyncio.Future) -> None:
            if self._flights.get(key) is flight:
                del self._flights[key]

        flight.task.add_done_callback(landed)
        return await flight.join()

    def _shared(self, completion: Any, step: str) -> Any:
        """A completion this caller got without a request (cache hit or joined flight)."""
        self._count(
            step,
            completions=1,
            cache_hits=1,
            prompt_tokens=completion.usage.prompt_tokens,
            completion_tokens=completion.usage.completion_tokens,
        )
        return completion.model_copy(update={"cached": True, "latency_s": 0.0})

    async def _fetch(self, payload: dict[str, Any], step: str, key: str | None, kind: _Kind) -> Any:
        """Send `payload` with retries; store the answer under `key` when given."""
        last_error = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if attempt:
                self._count(step, retries=1)
            t0 = time.monotonic()
            try:
                async with self._slots:
                    self._count(step, requests=1)
                    body, endpoint = await kind.send(self.backend, payload, step)
                completion = kind.parse(body, endpoint=endpoint, cached=False, latency_s=time.monotonic() - t0)
            except TransientError as e:
                last_error = str(e)
                if attempt < self.max_retries:
                    await asyncio.sleep(self._backoff(attempt, e.retry_after))
                continue
            except ValueError as e:  # a body the backend accepted but that is no completion
                last_error = f"malformed response: {e}"
                if attempt < self.max_retries:
                    await asyncio.sleep(self._backoff(attempt, None))
                continue
            except LLMUnavailable:
                self._count(step, failures=1)
                raise
            if key is not None:
                self.cache.put(key, body, step=step)
            self._count(
                step,
                completions=1,
                prompt_tokens=completion.usage.prompt_tokens,
                completion_tokens=completion.usage.completion_tokens,
            )
            return completion
        self._count(step, failures=1)
        raise LLMUnavailable(f"{step}: no response after {self.max_retries + 1} attempts; last error: {last_error}")

    async def complete_json(
        self,
        messages: list[dict[str, Any]],
        *,
        step: str,
        schema: type[T] | None = None,
        check: Callable[[Any], Any] | None = None,
        expect: type | None = dict,
        sample: int = 0,
        repair: bool = True,
        **params: Any,
    ) -> JSONReply[T]:
        """A JSON reply, validated by `schema` (a pydantic model) and then `check`.

        `check(value)` may return a replacement value or raise ValueError with a message for
        the model. One repair round (when `repair`), then `LLMOutputError`.
        """
        conversation = list(messages)
        completions: list[Completion] = []
        for round_ in range(2 if repair else 1):
            completion = await self.complete(conversation, step=step, sample=sample, **params)
            completions.append(completion)
            try:
                value = extract_json(completion.text, expect=expect)
                if schema is not None and isinstance(schema, type) and issubclass(schema, BaseModel):
                    value = schema.model_validate(value)
                if check is not None:
                    checked = check(value)
                    value = value if checked is None else checked
                return JSONReply(value=value, completion=completion, repaired=round_ > 0, completions=completions)
            except ReplyError as e:
                kind, problem = e.kind, str(e)
            except ValidationError as e:
                kind, problem = "wrong_keys", _validation_summary(e)
            except ValueError as e:
                kind, problem = "failed_check", str(e)
            if completion.finish_reason == "length":
                problem += " (the reply was cut off at the token limit)"
            shape = "array" if expect is list else "object" if expect is dict else "value"
            conversation = [
                *messages,
                {"role": "assistant", "content": completion.text},
                {"role": "user", "content": REPAIR_MESSAGE.format(error=problem, shape=shape)},
            ]
        raise LLMOutputError(f"{step}:{kind}", problem, completions[-1].text)

    async def aclose(self) -> None:
        for flight in list(self._flights.values()):
            flight.task.cancel()
        await self.backend.aclose()
        if self.cache is not None:
            self.cache.close()

    def usage_summary(self) -> dict[str, dict[str, int]]:
        return {step: u.model_dump() for step, u in sorted(self.usage.items())}
