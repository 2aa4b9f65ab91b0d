"""`python -m astra_verl.eval bfcl` against a loopback OpenAI-compatible server; results file; table."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter

import pytest

from astra_foundation.llm.fake_server import FakeOpenAIServer, FakeReply, chat_reply
from astra_verl.eval import bfcl_replay, cli
from astra_verl.eval.bfcl_run import BfclResult, format_table, overall, results_file, summarize

IDS = ["multi_turn_base_1", "multi_turn_miss_func_0"]


class Server:
    """A fake endpoint in its own thread: answers each entry with its ground truth, step by step."""

    def __init__(self, plans: dict[str, list], fail_for: str | None = None):
        self.plans = {q: bfcl_replay.steps(turns) for q, turns in plans.items()}
        self.fail_for = fail_for
        self.requests: Counter = Counter()
        self.tools_after_holdout: set[str] = set()
        self.loop = asyncio.new_event_loop()
        self.server = FakeOpenAIServer(self.handle, models=["fake-model"])
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.url = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)

    def handle(self, payload: dict, n: int) -> FakeReply:
        question = next(m["content"] for m in payload["messages"] if m["role"] == "user")
        self.requests[question] += 1
        if question == self.fail_for:
            return FakeReply(status=400, body={"error": {"message": "maximum context length exceeded"}})
        assert payload["tools"] and payload["temperature"] == 0.001
        last_user = [m["content"] for m in payload["messages"] if m["role"] == "user"][-1]
        if last_user.startswith("I have updated some more functions"):
            self.tools_after_holdout |= {t["function"]["name"] for t in payload["tools"]}
        k = sum(1 for m in payload["messages"] if m["role"] == "assistant")
        plan = self.plans[question]
        calls = plan[k] if k < len(plan) else []
        if not calls:
            return chat_reply("Done.")
        return chat_reply(tool_calls=[{"name": n, "arguments": a} for n, a in calls])

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture(scope="module")
def plans(bfcl_sample):
    entries = [bfcl_sample.data.entries[bfcl_sample.index[i]] for i in IDS]
    return {e.turns[0][0]["content"]: bfcl_replay.turn_calls(e) for e in entries}


def test_cli_evaluates_an_endpoint_resumes_and_reports(tmp_path, plans, capsys):
    first_question = next(iter(plans))
    server = Server(plans, fail_for=first_question)
    argv = ["bfcl", "--base-url", server.url, "--model", "fake-model", "--ids", ",".join(IDS), "--out", str(tmp_path)]
    argv += ["--concurrency", "2", "--retries", "0", "--categories", "base,miss_func", "--sandbox-workers", "1"]
    try:
        assert cli.main(argv) == 1  # one entry could not run: reported, exit status 1
        results = results_file(tmp_path / "results.jsonl")
        status = {r.id: r.status for r in results.records.values()}
        assert status == {"multi_turn_base_1": "error", "multi_turn_miss_func_0": "scored"}
        assert "400" in results.records["multi_turn_base_1"].error
        assert results.records["multi_turn_miss_func_0"].valid is True
        # FC mode: the hold-out turn grew the request's tool list and sent BFCL's FC sentence only
        messages = results.records["multi_turn_miss_func_0"].messages
        assert "I have updated some more functions you can choose from. What about now?" in [
            m["content"] for m in messages if m["role"] == "user"
        ]
        assert "sort" in server.tools_after_holdout
        server.fail_for = None
        before = dict(server.requests)
        assert cli.main(argv) == 0  # the rerun retries only the failed entry
        assert {q: n - before.get(q, 0) for q, n in server.requests.items() if n - before.get(q, 0)} == {
            first_question: server.requests[first_question] - before[first_question]
        }
        results = results_file(tmp_path / "results.jsonl")
        assert all(r.valid for r in results.records.values())
    finally:
        server.close()
    out = capsys.readouterr().out
    assert "| Model" in out and "Base" in out and "Miss Func" in out and "100.00" in out
    assert cli.main(["bfcl-score", str(tmp_path / "results.jsonl"), "--sandbox-workers", "1"]) == 0
    assert "re-scored 2 episodes; 0 verdicts changed" in capsys.readouterr().err


def test_table_has_the_papers_columns_and_overall_is_the_category_mean():
    def rec(i, cat, valid, status="scored"):
        r = {"id": f"{cat}{i}", "category": cat, "model": "m", "status": status, "valid": valid}
        if status == "error":
            return BfclResult(**r, error="LLMUnavailable: down")
        return BfclResult(**r, verdict={"error_type": "x"})

    records = [rec(i, "base", i < 3) for i in range(4)] + [
        rec(0, "long_context", True),
        rec(1, "long_context", False, "error"),
    ]
    scores = summarize(records)
    assert [s.accuracy for s in scores] == [0.75, 0.5] and overall(scores) == 0.625
    table = format_table(scores, "m")
    assert "| Base | Long Context | Overall |" in table.splitlines()[0].replace("  ", " ").replace("  ", " ")
    assert "62.50" in table and "1/2 (1 err)" in table
    assert scores[1].causes == Counter({"error: LLMUnavailable": 1})


def test_help_explains_every_command(capsys):
    for command in ("bfcl", "bfcl-export", "bfcl-score", "bfcl-replay"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        assert "usage: python -m astra_verl.eval " + command in capsys.readouterr().out


class CrashingServer(Server):
    """Ground truth, but every step with calls also carries the two replies that aborted runs
    in an outside audit: arguments nested 100,000 levels deep, and valid JSON holding a lone surrogate."""

    BAD = [
        {"id": "deep", "type": "function", "function": {"name": "ls", "arguments": "[" * 100_000 + "]" * 100_000}},
        {
            "id": "surrogate",
            "type": "function",
            "function": {"name": "echo", "arguments": '{"content": "\\ud83d", "file_name": "x"}'},
        },
    ]

    def handle(self, payload: dict, n: int) -> FakeReply:
        reply = super().handle(payload, n)
        message = reply.body["choices"][0]["message"]
        if message.get("tool_calls"):
            message["tool_calls"] = [*message["tool_calls"], *self.BAD]
        return reply


def test_replies_that_aborted_runs_are_scored_and_a_cached_run_resumes(tmp_path, plans):
    server = CrashingServer(plans)
    argv = ["bfcl", "--base-url", server.url, "--model", "fake-model", "--ids", ",".join(IDS), "--out", str(tmp_path)]
    argv += ["--concurrency", "2", "--retries", "0", "--categories", "base,miss_func", "--sandbox-workers", "1"]
    try:
        assert cli.main(argv) == 0  # every entry scored, none aborted the run
        results = results_file(tmp_path / "results.jsonl")
        assert {r.status for r in results.records.values()} == {"scored"}
        # BFCL drops each step with calls (one argument string does not decode): no entry is valid
        assert not any(r.valid for r in results.records.values())
        calls = [c for r in results.records.values() for c in r.episode["calls"]]
        assert {"content": "\ud83d", "file_name": "x"} in [c["arguments"] for c in calls]  # written, read back
        requests = sum(server.requests.values())
        (tmp_path / "results.jsonl").unlink()  # the run again, every reply from the cache
        assert cli.main(argv) == 0
        assert sum(server.requests.values()) == requests  # nothing asked twice: the cache replayed it
        again = results_file(tmp_path / "results.jsonl")
        assert {k: r.verdict for k, r in again.records.items()} == {k: r.verdict for k, r in results.records.items()}
    finally:
        server.close()
