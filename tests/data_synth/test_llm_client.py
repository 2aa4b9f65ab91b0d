"""The LLM client against a loopback fake OpenAI server: retries, backoff, pool, cache, JSON."""

import asyncio
import logging
import time

import pytest
import pytest_asyncio
from pydantic import BaseModel

from astra_foundation.llm import (
    HTTPBackend,
    LLMClient,
    LLMConfig,
    LLMOutputError,
    LLMUnavailable,
    ResponseCache,
    ScriptedBackend,
    build_client,
    usage_scope,
)
from astra_foundation.llm.cache import cache_key
from astra_foundation.llm.fake_server import FakeOpenAIServer, FakeReply, chat_reply, latency_draws
from astra_foundation.llm.http import EndpointPool, parse_retry_after

MSGS = [{"role": "user", "content": "hello"}]


@pytest.fixture(params=["aiohttp", "httpx"])
def transport(request):
    return request.param


def _client(urls, transport, *, cache=None, retries=4, timeout=5.0, concurrency=8, endpoint_backoff=0.05):
    backend = HTTPBackend(
        urls, api_key_env="FAKE_LLM_KEY", timeout_s=timeout, backoff_base_s=endpoint_backoff, transport=transport
    )
    return LLMClient(
        backend,
        model="m",
        cache=cache,
        max_retries=retries,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
        max_concurrency=concurrency,
    )


@pytest_asyncio.fixture
async def serve():
    servers = []

    async def start(handler):
        s = FakeOpenAIServer(handler)
        url = await s.start()
        servers.append(s)
        return s, url

    yield start
    for s in servers:
        await s.stop()


@pytest.mark.asyncio
async def test_retries_timeout_429_500_and_junk_then_succeeds(serve, monkeypatch, transport):
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-secret-value")
    script = [
        FakeReply(delay_s=2.0, body={}),  # times out (client timeout 0.5 s)
        FakeReply(status=429, body={"error": "slow down"}, headers={"Retry-After": "0.3"}),
        FakeReply(status=500, body="Internal Server Error"),
        FakeReply(status=200, body="<html>not json</html>"),
        FakeReply(status=200, body={"choices": []}),
    ]

    def handler(payload, n):
        return script[n] if n < len(script) else chat_reply("fine")

    server, url = await serve(handler)
    client = _client([url], transport, retries=6, timeout=0.5)
    t0 = time.monotonic()
    with usage_scope() as record_usage:
        c = await client.complete(MSGS, step="t")
    assert c.text == "fine" and c.endpoint == url
    assert len(server.requests) == 6
    assert time.monotonic() - t0 >= 0.3 + 0.5  # the timeout and Retry-After were both waited out
    assert client.usage["t"].retries == 5 and client.usage["t"].requests == 6
    assert record_usage.retries == 5 and record_usage.completions == 1
    assert server.headers[0]["Authorization"] == "Bearer sk-secret-value"
    await client.aclose()


@pytest.mark.asyncio
async def test_exhausted_retries_and_fatal_status(serve, caplog, transport):
    caplog.set_level(logging.DEBUG)
    server, url = await serve(lambda p, n: FakeReply(status=503, body="down"))
    client = _client([url], transport, retries=2)
    with pytest.raises(LLMUnavailable, match="after 3 attempts.*503"):
        await client.complete(MSGS, step="t")
    assert len(server.requests) == 3
    await client.aclose()

    server2, url2 = await serve(lambda p, n: FakeReply(status=400, body={"error": "context too long"}))
    client = _client([url2], transport, retries=5)
    with pytest.raises(LLMUnavailable, match="400"):
        await client.complete(MSGS, step="t")
    assert len(server2.requests) == 1  # a 400 is never retried
    assert client.usage["t"].failures == 1
    await client.aclose()


def test_retry_after_forms():
    assert parse_retry_after("2.5") == 2.5
    assert parse_retry_after(None) is None
    assert parse_retry_after("garbage") is None
    assert 9 <= parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) <= 11


@pytest.mark.asyncio
async def test_cache_makes_rerun_send_nothing(serve, tmp_path, transport):
    server, url = await serve(lambda p, n: chat_reply(f"answer {n}"))
    cache_path = tmp_path / "cache.sqlite"
    client = _client([url], transport, cache=ResponseCache(cache_path))
    first = [await client.complete(MSGS, step="t", sample=i) for i in range(3)]
    assert [c.text for c in first] == ["answer 0", "answer 1", "answer 2"]  # samples are distinct entries
    await client.aclose()
    assert len(server.requests) == 3

    client = _client([url], transport, cache=ResponseCache(cache_path))
    again = [await client.complete(MSGS, step="t", sample=i) for i in range(3)]
    assert [c.text for c in again] == [c.text for c in first] and all(c.cached for c in again)
    assert len(server.requests) == 3  # zero requests the second time
    assert client.usage["t"].cache_hits == 3 and client.usage["t"].requests == 0
    other = await client.complete(MSGS, step="t", sample=0, temperature=0.1)  # other params: other key
    assert not other.cached and len(server.requests) == 4
    await client.aclose()


@pytest.mark.asyncio
async def test_pool_spreads_and_avoids_failing_endpoint(serve, transport):
    good_a, url_a = await serve(lambda p, n: chat_reply("a", delay_s=0.05))
    good_b, url_b = await serve(lambda p, n: chat_reply("b", delay_s=0.05))
    bad, url_bad = await serve(lambda p, n: FakeReply(status=500, body="boom"))
    client = _client([url_a, url_b, url_bad], transport, retries=6, concurrency=6, endpoint_backoff=5.0)
    results = await asyncio.gather(*(client.complete(MSGS, step="t", sample=i) for i in range(30)))
    assert all(r.text in ("a", "b") for r in results)
    assert len(good_a.requests) >= 10 and len(good_b.requests) >= 10
    assert len(bad.requests) <= 2  # the first burst only: after failing it takes no traffic while backing off
    await client.aclose()


def test_pool_least_loaded_and_round_robin():
    pool = EndpointPool(["http://a", "http://b"], backoff_base_s=10)
    e1, e2 = pool.acquire(now=0), pool.acquire(now=0)
    assert {e1.base_url, e2.base_url} == {"http://a", "http://b"}
    pool.release(e1, ok=False, now=0)
    assert pool.acquire(now=1).base_url == e2.base_url  # e1 is backing off
    assert e1.blocked_until == 10
    pool.release(e2, ok=True, now=1)


@pytest.mark.asyncio
async def test_tools_passthrough_and_tool_calls_parsed(serve, transport):
    def handler(payload, n):
        assert payload["tools"][0]["function"]["name"] == "get_weather"
        return chat_reply(
            "",
            tool_calls=[
                {"name": "get_weather", "arguments": {"city": "Paris"}},
                {"name": "get_weather", "arguments": "{not json"},
            ],
        )

    server, url = await serve(handler)
    client = _client([url], transport)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    c = await client.complete(MSGS, step="agent", tools=tools, tool_choice="auto")
    assert server.requests[0]["tool_choice"] == "auto"
    assert c.tool_calls[0].args == {"city": "Paris"} and c.tool_calls[0].error is None
    assert c.tool_calls[1].args is None and "not valid JSON" in c.tool_calls[1].error
    assert c.message()["tool_calls"][0]["function"]["name"] == "get_weather"
    await client.aclose()


class Verdict(BaseModel):
    score: float
    reason: str


@pytest.mark.asyncio
async def test_json_repair_round():
    replies = iter(['```json\n{"score": 0.5, "reason": "ok"', '{"score": 0.9, "reason": "fixed"}'])
    backend = ScriptedBackend(responder=lambda step, payload: next(replies))
    client = LLMClient(backend, model="m")
    r = await client.complete_json(MSGS, step="judge", schema=Verdict)
    assert r.value == Verdict(score=0.9, reason="fixed") and r.repaired
    repair_request = backend.requests[1][1]["messages"]
    assert repair_request[-2]["role"] == "assistant" and "could not be used" in repair_request[-1]["content"]
    assert "does not parse" in repair_request[-1]["content"]


@pytest.mark.parametrize(
    "first, second, kind",
    [
        ("I cannot help with that.", "Still no.", "no_json"),
        ('{"score": "high"}', '{"verdict": 1}', "wrong_keys"),
        ('{"score": 2, "reason": "x"}', '{"score": 3, "reason": "x"}', "failed_check"),
    ],
)
@pytest.mark.asyncio
async def test_json_failure_after_repair_is_output_error(first, second, kind):
    replies = iter([first, second])
    client = LLMClient(ScriptedBackend(responder=lambda s, p: next(replies)), model="m")

    def in_range(v: Verdict):
        if not 0 <= v.score <= 1:
            raise ValueError(f"score {v.score} is outside [0, 1]")

    with pytest.raises(LLMOutputError) as e:
        await client.complete_json(MSGS, step="judge", schema=Verdict, check=in_range)
    assert e.value.reason == f"judge:{kind}"


@pytest.mark.asyncio
async def test_scripted_rules_and_errors(tmp_path):
    rules = tmp_path / "rules.jsonl"
    rules.write_text(
        '{"step": "a", "match": "weather", "responses": ["one", "two"], "then": "exhausted"}\n'
        '{"step": "a", "response": {"error": {"kind": "http", "status": 429, "retry_after": 0.01}}}\n'
        '{"step": "b", "response": {"content": "", "tool_calls": [{"name": "f", "arguments": {"x": 1}}]}}\n'
    )
    client = build_client(LLMConfig(scripted=str(rules), max_retries=1, backoff_base_s=0.001))
    weather = [{"role": "user", "content": "the weather?"}]
    assert (await client.complete(weather, step="a", sample=0)).text == "one"
    assert (await client.complete(weather, step="a", sample=1)).text == "two"
    with pytest.raises(LLMUnavailable, match="HTTP 429"):  # rule 1 exhausted; rule 2 keeps failing
        await client.complete(weather, step="a", sample=2)
    assert (await client.complete(MSGS, step="b")).tool_calls[0].args == {"x": 1}
    with pytest.raises(LLMUnavailable, match="no rule matches step 'c'"):
        await client.complete(MSGS, step="c")


def test_config_never_holds_the_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-print")
    cfg = LLMConfig(base_urls=["http://127.0.0.1:1/v1"], model="m")
    assert "sk-do-not-print" not in cfg.model_dump_json() + cfg.describe()


class GatedBackend:
    """Answers `reply <n>` to the n-th request sent, once `gate` opens; counts sends and cancellations."""

    name = "gated"

    def __init__(self, error: Exception | None = None):
        self.gate = asyncio.Event()
        self.sent: list[str] = []
        self.cancelled = 0
        self.error = error

    async def send(self, payload, *, step):
        self.sent.append(payload["messages"][-1]["content"])
        number = len(self.sent)
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if self.error is not None:
            raise self.error
        return {"choices": [{"message": {"content": f"reply {number}"}, "finish_reason": "stop"}]}, "gated"

    async def aclose(self):
        pass


async def _started(n=3):
    for _ in range(n):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_identical_requests_in_flight_are_sent_once(tmp_path):
    backend = GatedBackend()
    client = LLMClient(backend, model="m", cache=ResponseCache(tmp_path / "c.sqlite"))

    async def ask(sample):
        with usage_scope() as usage:
            return await client.complete(MSGS, step="t", sample=sample), usage

    tasks = [asyncio.ensure_future(ask(0)) for _ in range(4)] + [asyncio.ensure_future(ask(1))]
    await _started()
    backend.gate.set()
    results = await asyncio.gather(*tasks)
    assert len(backend.sent) == 2  # one per cache key, not one per caller
    same = {c.text for c, _ in results[:4]}
    assert len(same) == 1 and results[4][0].text not in same
    assert [c.cached for c, _ in results] == [False, True, True, True, False]
    assert [u.requests for _, u in results] == [1, 0, 0, 0, 1]  # the request counts in its first caller's record
    assert client.usage["t"].requests == 2 and client.usage["t"].cache_hits == 3 and client.usage["t"].completions == 5
    assert not client._flights
    await client.aclose()


@pytest.mark.asyncio
async def test_a_shared_request_outlives_one_caller_and_stops_with_the_last(tmp_path):
    backend = GatedBackend()
    client = LLMClient(backend, model="m", cache=ResponseCache(tmp_path / "c.sqlite"))
    first, second = (asyncio.ensure_future(client.complete(MSGS, step="t")) for _ in range(2))
    await _started()
    first.cancel()
    await _started()
    backend.gate.set()
    assert (await second).text == "reply 1" and backend.cancelled == 0
    assert first.cancelled()

    backend.gate.clear()
    other = [{"role": "user", "content": "other"}]
    lone = [asyncio.ensure_future(client.complete(other, step="t")) for _ in range(2)]
    await _started()
    for t in lone:
        t.cancel()
    await _started()
    assert backend.cancelled == 1 and not client._flights  # nobody waits: the request is dropped
    assert client.cache.get(cache_key(client.request(other), 0)) is None
    await client.aclose()


@pytest.mark.asyncio
async def test_a_shared_request_that_fails_fails_every_caller_once(tmp_path):
    backend = GatedBackend(error=LLMUnavailable("HTTP 400 (not retried)"))
    client = LLMClient(backend, model="m", cache=ResponseCache(tmp_path / "c.sqlite"))
    tasks = [asyncio.ensure_future(client.complete(MSGS, step="t")) for _ in range(3)]
    await _started()
    backend.gate.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert all(isinstance(r, LLMUnavailable) for r in results) and len(backend.sent) == 1
    assert client.usage["t"].failures == 1
    backend.error = None  # a later call asks again: failures are not cached
    assert (await client.complete(MSGS, step="t")).text == "reply 2"
    await client.aclose()


def test_fake_server_latency_draws_keep_the_mean_and_spread_with_jitter():
    fixed = latency_draws(0.2, 0.0)
    assert {fixed() for _ in range(10)} == {0.2}
    draw = latency_draws(0.2, 1.0, seed=3)
    xs = sorted(draw() for _ in range(40_000))
    assert abs(sum(xs) / len(xs) - 0.2) < 0.01  # the mean stays --latency
    assert xs[len(xs) // 2] < 0.15 and xs[int(0.99 * len(xs))] > 0.8  # median below the mean, a long tail
    a, b = latency_draws(0.2, 1.0, seed=3), latency_draws(0.2, 1.0, seed=3)
    assert [a() for _ in range(5)] == [b() for _ in range(5)]  # seeded: a rerun sees the same latencies
