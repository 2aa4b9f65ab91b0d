"""`eval envs` pieces: settings, the summary table, and a resumable run through astra_tool_agent
(the tiny random model: its episodes are short and wrong, which is all resuming needs)."""

from __future__ import annotations

import asyncio
import json
import threading

import pandas as pd
import pytest

from astra_foundation.llm.fake_server import FakeOpenAIServer, FakeReply
from astra_foundation.strict import SettingsError
from astra_verl.eval.envs import EnvEpisode, EnvEvalConfig, EnvEvaluation, checkpoint_name
from astra_verl.eval.envs_report import format_table, mean_se, summarize
from astra_verl.eval.results import ResultsFileError
from astra_verl.rollout.testing import ScriptedServer
from env_registry.answer_channel import final_message
from env_registry.export import ExportConfig, export_rows, write_export
from env_registry.families.procedural import generate
from env_registry.rows import RowInfo
from env_registry.store import EnvStore


def episode(row: int, f1: float, **kw) -> EnvEpisode:
    base = dict(
        id=f"{row}:{kw.pop('sample', 0)}", policy="p", env_id=f"e{row}", row=row, sample=0, data_source="astra/x",
        domain="geography", scenario_type="single_hop", hops=1, temperature=0.0, reward=f1, f1=f1, precision=f1,
        recall=f1, solved=1, n=2, calls=2, invalid_calls=1, distractor_calls=0, tool_errors=0, turns=3,
        final_answer_correct=False, terminated_by="no_tool_call", response="", response_sha="", elapsed_s=0.1,
    )  # fmt: skip
    return EnvEpisode(**{**base, **kw})


def test_settings_refuse_contradictions_and_typos(tmp_path):
    with pytest.raises(SettingsError, match="temperature"):
        EnvEvalConfig(data=tmp_path / "d.parquet", out=tmp_path, model_path="m", n=4)
    with pytest.raises(SettingsError, match="temprature"):
        EnvEvalConfig(data=tmp_path / "d.parquet", out=tmp_path, model_path="m", temprature=1.0)
    assert checkpoint_name("runs/sft/global_step_40/huggingface") == "global_step_40"


def test_the_table_averages_rows_first_and_pools_rates():
    assert mean_se([1.0, 0.0]) == (0.5, 0.5)
    # row 0 sampled twice (1.0, 0.0 -> 0.5), row 1 once (1.0): F1 0.75 over two rows
    episodes = [episode(0, 1.0), episode(0, 0.0, sample=1, hops=2, domain="finance"), episode(1, 1.0)]
    summary = summarize(episodes)
    top = summary["all"][0]
    assert (top.rows, top.episodes, top.f1) == (2, 3, pytest.approx(0.75))
    assert top.invalid_rate == pytest.approx(0.5) and top.solved_rate == pytest.approx(0.5)
    assert [g.name for g in summary["hops"]] == ["1", "2"] and [g.name for g in summary["domain"]] == [
        "finance",
        "geography",
    ]
    table = format_table(summary, "t")
    assert "by scenario type:" in table and "0.750±" in table
    # a column per variant: the other half of tool use is read apart from the answerable episodes
    mixed = summarize([episode(0, 1.0), episode(1, 0.0, variant="unanswerable"), episode(2, 0.5, variant="no_tool")])
    assert {g.name: g.f1 for g in mixed["variant"]} == {"no_tool": 0.5, "answerable": 1.0, "unanswerable": 0.0}
    assert "by variant:" in format_table(mixed, "t")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    root = tmp_path_factory.mktemp("envs")
    with EnvStore.open(root / "store", "a") as store:
        store.add_many(generate(3, seed=5, max_hops=1))
    cfg = ExportConfig(val_fraction=0)
    return write_export(export_rows(EnvStore.open(root / "store"), config=cfg, progress=False), root, cfg, {})


def test_a_run_resumes_where_it_stopped(tmp_path, rows, tiny_model_dir):
    def config(**kw) -> EnvEvalConfig:
        overrides = ["data.max_prompt_length=2048", "data.max_response_length=48"]
        return EnvEvalConfig(
            data=rows / "train.parquet", out=tmp_path, model_path=str(tiny_model_dir), overrides=overrides, **kw
        )

    first = EnvEvaluation(config(limit=2), progress=False)
    first.run()
    assert sorted(first.results.records) == ["0:0", "1:0"]
    assert all(r.terminated_by for r in first.results.records.values())
    again = EnvEvaluation(config(), progress=False)
    assert again.todo() == [(2, 0)]  # only the row not scored yet
    again.run()
    assert sorted(r.id for r in again.records()) == ["0:0", "1:0", "2:0"]
    assert {r.env_id for r in again.records()} == {r["env_id"] for r in again.facts}
    with pytest.raises(ResultsFileError, match=r"holds results of policy .* not of policy 'other'"):
        EnvEvaluation(config(label="other"), progress=False)  # another policy's episodes: refused before any


class TokenEndpoint:
    """A fake `/v1/completions` server in its own thread: each turn's reply from `script(prompt, k)`,
    returned as token ids (what vLLM's `return_token_ids` gives)."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script, self.payloads = tokenizer, script, []
        self.loop = asyncio.new_event_loop()
        self.server = FakeOpenAIServer(self.handle)
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.url = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)

    def handle(self, payload: dict, n: int) -> FakeReply:
        self.payloads.append(payload)
        prompt = self.tokenizer.decode(payload["prompt"])
        k = prompt.count("<|im_start|>assistant") - 1  # turns already written
        ids = self.tokenizer.encode(self.script(prompt, k), add_special_tokens=False)
        ids.append(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        body = {"choices": [{"text": "", "token_ids": ids, "finish_reason": "stop"}], "usage": {}}
        return FakeReply(body=body)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)


def test_an_endpoint_policy_runs_the_same_episode_as_a_local_server(tmp_path, rows, tiny_model_dir, tiny_tokenizer):
    store = EnvStore.open(rows.parent / "store")
    row = pd.read_parquet(rows / "train.parquet").iloc[0]
    env = store.get(RowInfo.from_extra_info(row["extra_info"]).env_id)
    q = next(q for q in env.sub_questions if q.needs_tool)
    args = env.tool(q.tool).golden_calls[0].args
    call = '<tool_call>\n{"name": "' + q.tool + '", "arguments": ' + json.dumps(args) + "}\n</tool_call>"

    def script(prompt: str, k: int) -> str:
        return call if k == 0 else final_message(env)  # the answer channel: what the reward reads

    # Room for the golden call's observation (a year of climate data overflows 256 tokens, and a
    # tool message that overflows the response budget solves nothing).
    budget = 1024
    overrides = ["data.max_prompt_length=2048", f"data.max_response_length={budget}"]

    def config(out, **kw) -> EnvEvalConfig:
        return EnvEvalConfig(
            data=rows / "train.parquet", out=out, model_path=str(tiny_model_dir), overrides=overrides, limit=1, **kw
        )

    local = EnvEvaluation(config(tmp_path / "local"), server=ScriptedServer(tiny_tokenizer, script), progress=False)
    local.run()
    endpoint = TokenEndpoint(tiny_tokenizer, script)
    try:
        remote = EnvEvaluation(config(tmp_path / "remote", base_url=endpoint.url, model="tiny"), progress=False)
        remote.run()
    finally:
        endpoint.close()
    mine, theirs = local.records()[0], remote.records()[0]
    assert mine.reward > 0 and mine.calls == 1
    same = {"elapsed_s"}
    assert mine.model_dump(exclude=same) == theirs.model_dump(exclude=same)
    first = endpoint.payloads[0]
    assert first["model"] == "tiny" and first["return_token_ids"] is True and first["temperature"] == 0
    assert all(isinstance(t, int) for t in first["prompt"]) and first["max_tokens"] == budget
    with pytest.raises(SettingsError, match="--model"):
        config(tmp_path, base_url=endpoint.url)
