"""`eval envs --user-base-url URL --user-model NAME` (issue 49): the missing-value rows' user worded
by an LLM; an unreachable user is refused before the first episode; results name their user."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from astra_foundation.llm.fake_server import FakeOpenAIServer, chat_reply
from astra_foundation.strict import SettingsError
from astra_verl.eval.cli import main
from astra_verl.eval.envs import EnvEpisode, EnvEvalConfig, EnvEvaluation, results_file, with_user
from astra_verl.eval.results import ResultsFileError
from astra_verl.rollout.testing import ScriptedServer
from env_registry.answer_channel import final_message
from env_registry.export import ExportConfig, export_rows, write_export
from env_registry.families.procedural import generate
from env_registry.spec import Variant
from env_registry.store import EnvStore
from env_registry.variants import LLMUserConfig, VariantShares, ask_message

DOWN = "http://127.0.0.1:9/v1"  # the discard port: nothing listens


def _episode(user: str) -> EnvEpisode:
    return EnvEpisode(
        id="0:0", policy="p", env_id="e", row=0, sample=0, data_source="astra/x", domain="d",
        scenario_type="single_hop", hops=1, temperature=0.0, user=user, reward=1.0, f1=1.0, precision=1.0,
        recall=1.0, solved=1, n=1, calls=1, invalid_calls=0, distractor_calls=0, tool_errors=0, turns=2,
        final_answer_correct=True, terminated_by="no_tool_call", response="", response_sha="", elapsed_s=0.1,
    )  # fmt: skip


def _args(tmp_path, *flags: str) -> list[str]:
    data = tmp_path / "val.parquet"
    data.write_bytes(b"")  # never read: the user's endpoint is checked first
    (tmp_path / "ckpt").mkdir(exist_ok=True)
    return ["envs", "--data", str(data), "--model-path", str(tmp_path / "ckpt"), "--out", str(tmp_path / "out"), *flags]


def test_an_unreachable_user_endpoint_is_refused_before_the_first_episode(tmp_path, capsys):
    assert main(_args(tmp_path, "--user-base-url", DOWN, "--user-model", "user-model")) == 2
    err = capsys.readouterr().err
    assert DOWN in err and "start the server or fix --user-base-url" in err
    assert not (tmp_path / "out").exists()  # no episode ran, no results file


@pytest.mark.parametrize("flags", [["--user-base-url", DOWN], ["--user-model", "user-model"]])
def test_one_user_flag_without_the_other_is_refused(tmp_path, capsys, flags):
    assert main(_args(tmp_path, *flags)) == 2
    assert "needs both --user-base-url and --user-model" in capsys.readouterr().err
    with pytest.raises(SettingsError, match="--user-model"):
        EnvEvalConfig(data=tmp_path, out=tmp_path, model_path="m", user_base_url=DOWN)


def test_the_user_is_part_of_the_runs_settings(tmp_path):
    path = tmp_path / "results.jsonl"
    scripted = EnvEvalConfig(data=tmp_path, out=tmp_path, model_path="m")
    llm = EnvEvalConfig(data=tmp_path, out=tmp_path, model_path="m", user_base_url=DOWN, user_model="u")
    assert (scripted.user_name, llm.user_name) == ("scripted", "llm:u")
    results_file(path, "p", 0.0, scripted.user_name).append(_episode("scripted"))
    with pytest.raises(ResultsFileError, match="user 'scripted'.*user 'llm:u'"):
        results_file(path, "p", 0.0, llm.user_name)
    assert results_file(path).records["0:0"].user == "scripted"
    # a line written before the field existed is the scripted user's (no other existed)
    old = tmp_path / "old.jsonl"
    old.write_text(_episode("scripted").model_dump_json(exclude={"user"}) + "\n")
    assert results_file(old, "p", 0.0).records["0:0"].user == "scripted"


def test_only_the_missing_value_rows_get_the_llm_user():
    envs = generate(40, seed=4, variants=VariantShares.parse("mix"))
    user = LLMUserConfig(base_url=DOWN, model="u")
    for env in envs:
        scripted = (
            {"name": "scripted_user_turns"} if env.variant is Variant.MISSING_VALUE else {"name": "astra_default"}
        )
        row = {"prompt": [], "extra_info": {"index": 0, "interaction_kwargs": scripted}}
        kwargs = with_user(row, env, user)["extra_info"]["interaction_kwargs"]
        if env.variant is Variant.MISSING_VALUE:
            assert kwargs["name"] == "llm_user_turns" and kwargs["user_value"] == env.user.value
            assert kwargs["user_base_url"] == DOWN and kwargs["turns"] == env.user.turns()
        else:
            assert kwargs == {"name": "astra_default"}
        assert with_user(row, env, None) is row  # the scripted user: the row as it is


class ChatEndpoint:
    """A fake user model (`/v1/chat/completions`) in its own thread: the evaluation runs its own loop."""

    def __init__(self, says: str):
        self.payloads: list[dict] = []
        self.loop = asyncio.new_event_loop()

        def handle(payload: dict, n: int):
            self.payloads.append(payload)
            return chat_reply(says)

        self.server = FakeOpenAIServer(handle, models=("user-model",))
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.url = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)


def test_an_llm_user_answers_the_agents_question_in_an_episode(tmp_path, tiny_model_dir, tiny_tokenizer):
    env = next(
        e for e in generate(40, seed=4, variants=VariantShares.parse("mix")) if e.variant is Variant.MISSING_VALUE
    )
    with EnvStore.open(tmp_path / "store", "a") as store:
        store.add_many([env])
    cfg = ExportConfig(val_fraction=0)  # the scripted user's rows, as an export without the flags writes them
    rows = write_export(export_rows(EnvStore.open(tmp_path / "store"), config=cfg, progress=False), tmp_path, cfg, {})
    q = next(q for q in env.sub_questions if q.needs_tool)
    call = json.dumps({"name": q.tool, "arguments": env.tool(q.tool).golden_calls[0].args})
    script = [ask_message(env), f"<tool_call>\n{call}\n</tool_call>", final_message(env)]
    says = "It is the one on my note."  # not the scripted reply
    user = ChatEndpoint(says)
    try:
        evaluation = EnvEvaluation(
            EnvEvalConfig(
                data=rows / "train.parquet",
                out=tmp_path / "out",
                model_path=str(tiny_model_dir),
                overrides=["data.max_prompt_length=2048", "data.max_response_length=1024"],
                user_base_url=user.url,
                user_model="user-model",
            ),
            server=ScriptedServer(tiny_tokenizer, script),
            progress=False,
        )
        evaluation.run()
    finally:
        user.close()
    (record,) = evaluation.records()
    assert record.user == "llm:user-model" and record.variant == "missing_value"
    assert says in record.response and env.user.reply not in record.response  # the model's words reached the agent
    assert len(user.payloads) == 1 and user.payloads[0]["model"] == "user-model"
    messages = user.payloads[0]["messages"]
    assert env.user.value in messages[0]["content"] and messages[-1] == {"role": "user", "content": script[0]}
    assert record.calls == 1 and record.turns == 3
