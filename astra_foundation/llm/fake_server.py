"""A loopback OpenAI-compatible server with scripted behaviour: test and benchmark scaffolding.

It answers `POST /v1/chat/completions` (and `/v1/completions`, token prompts: the payload has
`prompt`) through a handler `(payload, n) -> FakeReply`, `n` counting requests from 0, and
`GET /v1/models` with the names in `models` (what the clients' preflight asks), so a test can
make request 0 time out, request 1 get a 429 with
Retry-After and request 2 succeed. Nothing here talks to a model.

    server = FakeOpenAIServer(handler, models=("fake",))
    base_url = await server.start()        # http://127.0.0.1:<port>/v1
    ...
    await server.stop()

As a process (for benchmarks, so the server does not share the client's event loop):

    python -m astra_foundation.llm.fake_server --port 0 --latency 0.2 --responder pkg.module:function --model fake

prints `READY <base_url>` on stdout; `function(payload)` returns a scripted response (see
`astra_foundation.llm.scripted`), served after `--latency` seconds; with `--jitter S` after a
lognormal draw with that mean and shape S (real endpoints have a long tail: a barrier waits
for it), seeded by `--seed`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import inspect
import math
import random
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from astra_foundation.llm.scripted import response_body


@dataclass
class FakeReply:
    status: int = 200
    body: dict[str, Any] | str | None = None  # dict: JSON; str: sent verbatim (junk)
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def chat_reply(content: str = "", *, tool_calls: list[dict[str, Any]] | None = None, delay_s: float = 0.0) -> FakeReply:
    answer: dict[str, Any] = {"content": content}
    if tool_calls:
        answer["tool_calls"] = tool_calls
    return FakeReply(body=response_body(answer, {"model": "fake"}), delay_s=delay_s)


Handler = Callable[[dict[str, Any], int], "FakeReply | Awaitable[FakeReply]"]


class FakeOpenAIServer:
    def __init__(
        self,
        handler: Handler,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Sequence[str] = ("fake",),
        api_key: str | None = None,
        max_model_len: int | None = None,
    ):
        self.handler = handler
        self.models = list(models)
        self.max_model_len = max_model_len  # when set, listed with each model, as vLLM lists its context
        self.api_key = api_key  # when set, a request without `Bearer <api_key>` gets a 401
        self.host = host
        self.port = port
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._runner: web.AppRunner | None = None

    def _refused(self, request: web.Request) -> web.StreamResponse | None:
        if self.api_key is None or request.headers.get("Authorization") == f"Bearer {self.api_key}":
            return None
        return web.json_response({"error": {"message": "invalid API key"}}, status=401)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        refused = self._refused(request)
        if refused is not None:
            return refused
        payload = await request.json()
        n = len(self.requests)
        self.requests.append(payload)
        self.headers.append(dict(request.headers))
        reply = self.handler(payload, n)
        if inspect.isawaitable(reply):
            reply = await reply
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if isinstance(reply.body, str):
            return web.Response(status=reply.status, text=reply.body, headers=reply.headers)
        return web.json_response(reply.body or {}, status=reply.status, headers=reply.headers)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        return self._refused(request) or web.json_response(
            {"object": "list", "data": [self._entry(m) for m in self.models]}
        )

    def _entry(self, model: str) -> dict[str, Any]:
        extra = {} if self.max_model_len is None else {"max_model_len": self.max_model_len}
        return {"id": model, "object": "model", **extra}

    async def start(self) -> str:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)  # a test server stops at once
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        return f"http://{self.host}:{self.port}/v1"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@contextlib.contextmanager
def serve_in_thread(handler: Handler, **kwargs: Any) -> Iterator[str]:
    """A `FakeOpenAIServer` on its own event loop in a daemon thread, for synchronous callers (a
    CLI's `main`, which runs its own loop); yields the base URL and stops the server on exit."""
    loop = asyncio.new_event_loop()
    server = FakeOpenAIServer(handler, **kwargs)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=30)
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        loop.close()


def latency_draws(mean: float, jitter: float, *, seed: int = 0) -> Callable[[], float]:
    """Seconds per answer: `mean` when `jitter` is 0, else lognormal draws with that mean and
    shape `jitter` (seeded)."""
    if jitter <= 0 or mean <= 0:
        return lambda: mean
    rng = random.Random(seed)
    mu = math.log(mean) - jitter**2 / 2  # E[lognormal(mu, s)] = exp(mu + s^2 / 2)
    return lambda: rng.lognormvariate(mu, jitter)


def _load(spec: str) -> Callable[[dict[str, Any]], Any]:
    module, _, name = spec.partition(":")
    if not name:
        raise SystemExit(f"--responder must be module:function, not {spec!r}")
    return getattr(importlib.import_module(module), name)


async def _serve(args: argparse.Namespace) -> None:
    responder = _load(args.responder)
    delay = latency_draws(args.latency, args.jitter, seed=args.seed)

    def handler(payload: dict[str, Any], n: int) -> FakeReply:
        return FakeReply(body=response_body(responder(payload), payload), delay_s=delay())

    server = FakeOpenAIServer(handler, port=args.port, models=args.model or ["fake"])
    base_url = await server.start()
    print(f"READY {base_url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m astra_foundation.llm.fake_server", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--latency", type=float, default=0.2, help="seconds before each answer (the mean with --jitter)"
    )
    parser.add_argument(
        "--jitter", type=float, default=0.0, help="lognormal shape of the latency (0: fixed; 1: long tail)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the --jitter draws")
    parser.add_argument("--model", action="append", help="a model name GET /v1/models lists (repeatable; default fake)")
    parser.add_argument("--responder", required=True, help="module:function mapping a request payload to a response")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
