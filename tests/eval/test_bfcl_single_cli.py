"""`python -m astra_verl.eval bfcl-single` end to end against a loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from astra_foundation.llm.fake_server import FakeReply, chat_reply, serve_in_thread
from astra_verl.eval import bfcl_single as bs
from astra_verl.eval import cli

sys.path.insert(0, str(Path(__file__).parent))
from bfcl_single_cases import truth  # noqa: E402
from testkit import require  # noqa: E402

CATEGORIES = "simple_python,parallel,irrelevance,live_relevance"


@pytest.fixture
def checker():
    """The tests that run BFCL's checker in the sandbox need its packages (tree-sitter grammars)."""
    require(bs.missing_packages(), bs.INSTALL)


class Model:
    """Answers each entry with its ground truth in the requested style; `wrong` entries get a
    wrong value, `down` ones an HTTP 400 (the entry is an error record)."""

    def __init__(self, style: str, entries: list[bs.SingleEntry]):
        self.style = style
        self.by_text = {e.question[0][-1]["content"]: e for e in entries}
        self.down: set[str] = set()
        self.wrong: set[str] = set()
        self.asked: Counter = Counter()
        self.payloads: dict[str, dict] = {}

    def __call__(self, payload: dict, n: int) -> FakeReply:
        entry = self.by_text[payload["messages"][-1]["content"]]
        self.asked[entry.id] += 1
        self.payloads[entry.id] = payload
        if entry.id in self.down:
            return FakeReply(status=400, body={"error": {"message": "maximum context length exceeded"}})
        answer = truth(entry, self.style)
        if entry.id in self.wrong:
            answer = "I would rather not." if "relevance" in entry.category else "[]"
        if isinstance(answer, list):
            calls = [{"name": name, "arguments": args} for call in answer for name, args in call.items()]
            return chat_reply(tool_calls=calls)
        return chat_reply(answer)


def _argv(url: str, out: Path, style: str) -> list[str]:
    return ["bfcl-single", "--base-url", url, "--model", "fake", "--style", style, "--categories", CATEGORIES,
            "--limit", "2", "--out", str(out), "--retries", "0", "--sandbox-workers", "1", "--concurrency", "3", "-q"]  # fmt: skip


@pytest.mark.parametrize("style", ["fc", "prompting"])
def test_cli_runs_scores_resumes_and_prints_bfcls_table(tmp_path, capsys, style, checker):
    entries = bs.load_entries(bs.parse_categories(CATEGORIES), limit=2)
    model = Model(style, entries)
    model.down = {"parallel_1"}
    model.wrong = {"simple_python_1", "live_relevance_1-1-0"}
    with serve_in_thread(model, models=["fake"]) as url:
        assert cli.main(_argv(url, tmp_path, style)) == 1  # one entry could not run: exit status 1
        first = capsys.readouterr().out
        results = bs.results_file(tmp_path / "results.jsonl")
        assert results.records["parallel_1"].status == "error" and "400" in results.records["parallel_1"].error
        assert {i for i, r in results.records.items() if r.status == "scored" and not r.valid} == model.wrong
        assert "| parallel | 50.00 | 35.36 | 1/2 (1 err) |" in first

        model.down = set()
        before = Counter(model.asked)
        assert cli.main(_argv(url, tmp_path, style)) == 0  # the rerun asks only for the failed entry
        assert model.asked - before == Counter({"parallel_1": 1})
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line for line in out.splitlines() if line.startswith("| ")}
    assert "| simple_python | 50.00 | 35.36 | 1/2 |" in out and "| parallel | 100.00 | 0.00 | 2/2 |" in out
    assert "| irrelevance | 100.00 | 0.00 | 2/2 |" in out and "| live_relevance | 50.00 | 35.36 | 1/2 |" in out
    # BFCL's aggregates over what ran: Non-Live overall = mean(Simple, parallel); the others say what is missing
    assert rows["**Non-Live overall** (2/4 categories)"].split("|")[2].strip() == "75.00"
    assert rows["**Relevance**"].split("|")[2].strip() == "50.00"
    assert (tmp_path / "bfcl_single.png").stat().st_size > 0 and (tmp_path / "table.md").read_text().startswith("BFCL")
    # the requests: FC sends BFCL's tools ("." renamed), prompting BFCL's system prompt and no tools
    payload = model.payloads["parallel_0"]
    if style == "fc":
        assert [t["function"]["name"] for t in payload["tools"]] == ["spotify_play"]
        assert payload["messages"][0]["role"] == "user" and payload["temperature"] == 0.001
    else:
        assert "tools" not in payload and payload["messages"][0]["role"] == "system"
        assert "spotify.play" in payload["messages"][0]["content"]


def test_a_results_file_of_another_style_is_refused(tmp_path, capsys, checker):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps({"version": 1, "id": "simple_python_0", "category": "simple_python", "style": "fc",
                                "model": "fake", "status": "scored", "valid": True}) + "\n")  # fmt: skip
    entries = bs.load_entries(["simple_python"], limit=1)
    with serve_in_thread(Model("prompting", entries), models=["fake"]) as url:
        assert cli.main(_argv(url, tmp_path, "prompting")) == 2
    err = capsys.readouterr().err
    assert f"{path} holds results of model 'fake', style 'fc' (line 1), not of model 'fake', style 'prompting'" in err
    assert f"pass another --out or delete {path}" in err


def test_sample_is_seeded_per_category_and_categories_accept_groups():
    a = bs.load_entries(["live_simple", "multiple"], sample=5, seed=3)
    b = bs.load_entries(["live_simple", "multiple"], sample=5, seed=3)
    c = bs.load_entries(["live_simple", "multiple"], sample=5, seed=4)
    assert [e.id for e in a] == [e.id for e in b] != [e.id for e in c]
    assert Counter(e.category for e in a) == {"live_simple": 5, "multiple": 5}
    assert bs.parse_categories("live,irrelevance") == ["irrelevance", *bs.LIVE]
    with pytest.raises(ValueError, match="unknown category 'multi_turn_base'"):
        bs.parse_categories("multi_turn_base")


def test_help_is_fast_to_reach_and_names_the_styles(capsys):
    with pytest.raises(SystemExit):
        cli.main(["bfcl-single", "--help"])
    assert "--style {fc,prompting}" in capsys.readouterr().out


def test_local_checkpoint_parses_calls_as_vllms_hermes_parser(tiny_model_dir, tiny_tokenizer):
    from astra_verl.eval.bfcl_single_local import ContextOverflow, LocalModel

    local = LocalModel(str(tiny_model_dir), max_tokens=8, temperature=0.0)
    ids = lambda text: tiny_tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    good = local.completion([1, 2], ids('Sure. <tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'), "stop")
    assert good.text == "Sure." and [(c.name, json.loads(c.arguments)) for c in good.tool_calls] == [("f", {"a": 1})]
    bad_block = '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call><tool_call>{"name": </tool_call>'
    bad = local.completion([1], ids(bad_block), "stop")  # one block does not parse: no calls, the text as content
    assert bad.tool_calls == [] and bad.text == bad_block and bad.usage.prompt_tokens == 1
    with pytest.raises(ContextOverflow, match="exceeds the model's context"):
        local.prompt_ids([{"role": "user", "content": "word " * (local.context + 10)}], None)


def test_cli_runs_a_local_checkpoint_without_a_server(tmp_path, tiny_model_dir, capsys, checker):
    argv = ["bfcl-single", "--model-path", str(tiny_model_dir), "--categories", "simple_python,irrelevance",
            "--limit", "1", "--max-tokens", "8", "--out", str(tmp_path), "--sandbox-workers", "1", "-q"]  # fmt: skip
    assert cli.main(argv) == 0
    results = bs.results_file(tmp_path / "results.jsonl")
    assert sorted(results.records) == ["irrelevance_0", "simple_python_0"]
    assert {r.status for r in results.records.values()} == {"scored"}
    assert {r.model for r in results.records.values()} == {tiny_model_dir.resolve().name}
    out = capsys.readouterr().out
    assert "| simple_python |" in out and "| irrelevance |" in out


def test_without_the_checkers_packages_the_cli_says_what_to_install_before_it_starts(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(bs, "missing_packages", lambda: ["tree_sitter_java"])
    assert cli.main(_argv("http://127.0.0.1:9/v1", tmp_path / "run", "fc")) == 2
    err = capsys.readouterr().err
    assert "needs tree_sitter_java, not installed here" in err and "pip install 'astra-verl[bfcl]'" in err
    assert not (tmp_path / "run").exists()
