"""OpenAI-compatible HTTP backend over a pool of endpoints (`vllm serve` replicas, hosted APIs).

Every request goes to the least-loaded healthy endpoint (fewest requests in flight; ties go
round-robin). An endpoint that fails (connection error, timeout, 429, 5xx, junk body) backs
off exponentially, or for the server's Retry-After, and takes no traffic until then; a
success clears its record. When every endpoint is backing off, the one free soonest is used.

Status handling: 200 with a `chat.completion` body is a response; 408, 429, 5xx, timeouts,
transport errors and unparseable bodies raise `TransientError` (the client retries); any
other status raises `LLMUnavailable` at once (a 400 will not improve by asking again).

The API key is read from the environment variable named in the config, sent only as a
bearer header, and never logged or put into an error message.
"""

from __future__ import annotations

import asyncio
import email.utils
import itertools
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from astra_foundation.llm.types import LLMUnavailable, TransientError, json_text

log = logging.getLogger(__name__)

_RETRYABLE_STATUS = {408, 409, 425, 429}


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class Endpoint:
    base_url: str
    in_flight: int = 0
    failures: int = 0
    blocked_until: float = 0.0
    served: int = 0


class EndpointPool:
    """Least-loaded choice among endpoints, with per-endpoint failure backoff."""

    def __init__(self, base_urls: list[str], *, backoff_base_s: float = 1.0, backoff_max_s: float = 60.0):
        if not base_urls:
            raise ValueError("no LLM endpoint: give at least one base URL (e.g. http://127.0.0.1:8000/v1)")
        self.endpoints = [Endpoint(u.rstrip("/")) for u in base_urls]
        self._rr = itertools.count()
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s

    def acquire(self, now: float | None = None) -> Endpoint:
        now = time.monotonic() if now is None else now
        healthy = [e for e in self.endpoints if e.blocked_until <= now]
        if healthy:
            least = min(e.in_flight for e in healthy)
            tied = [e for e in healthy if e.in_flight == least]
            ep = tied[next(self._rr) % len(tied)]
        else:
            ep = min(self.endpoints, key=lambda e: e.blocked_until)
        ep.in_flight += 1
        return ep

    def release(self, ep: Endpoint, *, ok: bool, retry_after: float | None = None, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        ep.in_flight -= 1
        if ok:
            ep.failures = 0
            ep.served += 1
            return
        ep.failures += 1
        backoff = min(self.backoff_max_s, self.backoff_base_s * 2 ** (ep.failures - 1))
        ep.blocked_until = max(ep.blocked_until, now + max(backoff, retry_after or 0.0))


TRANSPORTS = ("aiohttp", "httpx")


class HTTPBackend:
    """`send(payload)` POSTs to `<base_url>/chat/completions` of a pooled endpoint (`route="completions"`:
    to `<base_url>/completions`).

    `transport`: "aiohttp" (default) or "httpx". Both speak the same protocol; aiohttp is the
    default because httpx's async connection pool falls far behind under concurrency
    (encode/httpx#3215; `bench/synth_throughput.py --transport` measures both here)."""

    name = "http"

    def __init__(
        self,
        base_urls: list[str],
        *,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        max_connections: int = 64,
        backoff_base_s: float = 1.0,
        backoff_max_s: float = 60.0,
        transport: str = "aiohttp",
    ):
        if transport not in TRANSPORTS:
            raise ValueError(f"transport must be one of {TRANSPORTS}, not {transport!r}")
        self.pool = EndpointPool(base_urls, backoff_base_s=backoff_base_s, backoff_max_s=backoff_max_s)
        key = os.environ.get(api_key_env) if api_key_env else None
        self._headers = {"Content-Type": "application/json"}
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self.has_key = bool(key)
        self.transport = transport
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_connections = max_connections
        self._session: Any = None  # created in the running loop on first use

    async def send(
        self, payload: dict[str, Any], *, step: str, route: str = "chat/completions"
    ) -> tuple[dict[str, Any], str]:
        """POST `payload` to `<base_url>/<route>` (`completions` for token prompts) of a pooled endpoint."""
        ep = self.pool.acquire()
        url = f"{ep.base_url}/{route}"
        try:
            status, retry_after, text = await self._post(url, json_text(payload).encode())
            body = _classify(url, status, retry_after, text)
        except TransientError as e:
            self.pool.release(ep, ok=False, retry_after=e.retry_after)
            raise
        except BaseException:
            self.pool.release(ep, ok=True)  # a refused request or a cancellation says nothing of the endpoint's health
            raise
        self.pool.release(ep, ok=True)
        return body, ep.base_url

    async def _post(self, url: str, data: bytes) -> tuple[int, float | None, str]:
        """(status, Retry-After seconds, body text); transport failures raise TransientError."""
        if self.transport == "httpx":
            return await self._post_httpx(url, data)
        import aiohttp  # lazy: only the configured transport is imported

        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections),
                timeout=aiohttp.ClientTimeout(total=self.timeout_s, connect=self.connect_timeout_s),
            )
        try:
            async with self._session.post(url, data=data, headers=self._headers) as r:
                raw = await r.read()
                return r.status, parse_retry_after(r.headers.get("retry-after")), raw.decode("utf-8", "replace")
        except asyncio.TimeoutError:
            raise TransientError(f"{url}: timed out after {self.timeout_s} s") from None
        except aiohttp.ClientError as e:
            raise TransientError(f"{url}: {type(e).__name__}: {e}") from None

    async def _post_httpx(self, url: str, data: bytes) -> tuple[int, float | None, str]:
        import httpx  # lazy: only the configured transport is imported

        if self._session is None:
            self._session = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s),
                limits=httpx.Limits(
                    max_connections=self.max_connections, max_keepalive_connections=self.max_connections
                ),
            )
        try:
            r = await self._session.post(url, content=data, headers=self._headers)
        except httpx.TimeoutException as e:
            raise TransientError(f"{url}: timed out ({type(e).__name__})") from None
        except httpx.TransportError as e:
            raise TransientError(f"{url}: {type(e).__name__}: {e}") from None
        return r.status_code, parse_retry_after(r.headers.get("retry-after")), r.text

    async def aclose(self) -> None:
        if self._session is not None:
            await (self._session.aclose() if self.transport == "httpx" else self._session.close())
            self._session = None


def _classify(url: str, status: int, retry_after: float | None, text: str) -> dict[str, Any]:
    """The completion body of a 200, or the error a status stands for (module doc)."""
    if status == 200:
        try:
            body = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the decoder goes
            raise TransientError(f"{url}: 200 with a body that is not JSON: {text[:120]!r}") from None
        if not isinstance(body, dict) or not isinstance(body.get("choices"), list) or not body["choices"]:
            raise TransientError(f"{url}: 200 with a body that is not a chat completion: {text[:120]!r}")
        return body
    snippet = text[:200].replace("\n", " ")
    if status in _RETRYABLE_STATUS or status >= 500:
        raise TransientError(f"{url}: HTTP {status}: {snippet}", retry_after=retry_after, status=status)
    raise LLMUnavailable(f"{url}: HTTP {status} (not retried): {snippet}")
