"""The preflight of LLM endpoints: each way an endpoint cannot serve a run is one clear error,
found before the first record (one GET /v1/models per endpoint)."""

from __future__ import annotations

import socket
import time

import pytest

from astra_foundation.llm import LLMConfig, LLMFlags, LLMSettingsError, PreflightError, preflight
from astra_foundation.llm.fake_server import chat_reply, serve_in_thread


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answer(payload, n):
    return chat_reply("hi")


def test_a_served_model_passes_and_every_endpoint_of_a_pool_is_asked():
    with serve_in_thread(_answer, models=["a", "m"]) as one, serve_in_thread(_answer, models=["m"]) as two:
        preflight(LLMConfig(base_urls=[one, two], model="m"))
        with pytest.raises(PreflightError, match=r"does not serve the model 'a' \(it serves: m\)"):
            preflight(LLMConfig(base_urls=[one, two], model="a"))


def test_a_server_that_is_down_fails_at_once_naming_the_url_and_the_flag():
    url = f"http://127.0.0.1:{_unused_port()}/v1"
    t0 = time.monotonic()
    with pytest.raises(PreflightError) as e:
        preflight(LLMConfig(base_urls=[url], model="m"))
    assert time.monotonic() - t0 < 5  # no retries: the client would spend a minute on each record
    assert f"{url}/models: cannot connect" in str(e.value) and "--base-url" in str(e.value)


def test_a_missing_model_name_lists_what_the_server_serves():
    with serve_in_thread(_answer, models=["Qwen3-32B"]) as url:
        with pytest.raises(PreflightError, match=r"--judge-model is required; .* serves: Qwen3-32B"):
            preflight(LLMConfig(base_urls=[url]), flags=LLMFlags("judge"))
        with pytest.raises(PreflightError, match=r"fix --model$"):
            preflight(LLMConfig(base_urls=[url], model="qwen"), flags=LLMFlags(""))


def test_a_url_without_v1_is_named_as_such():
    with serve_in_thread(_answer) as url:
        with pytest.raises(PreflightError, match="HTTP 404; --base-url must be the OpenAI-compatible base URL"):
            preflight(LLMConfig(base_urls=[url.removesuffix("/v1")], model="fake"))


def test_a_refused_key_names_the_variable_it_was_read_from(monkeypatch):
    monkeypatch.delenv("MY_KEY", raising=False)
    with serve_in_thread(_answer, api_key="sk-right") as url:
        cfg = LLMConfig(base_urls=[url], model="fake", api_key_env="MY_KEY")
        with pytest.raises(PreflightError, match=r"HTTP 401, the key was refused; .* MY_KEY \(which is not set\)"):
            preflight(cfg)
        monkeypatch.setenv("MY_KEY", "sk-wrong")
        with pytest.raises(PreflightError, match=r"MY_KEY \(which is set\)") as e:
            preflight(cfg)
        assert "sk-wrong" not in str(e.value)
        monkeypatch.setenv("MY_KEY", "sk-right")
        preflight(cfg)


def test_scripted_backends_are_loaded_not_reached_and_no_endpoint_is_an_error(tmp_path):
    preflight(LLMConfig(responder="data_synth.env.canned:respond"))
    with pytest.raises(LLMSettingsError, match="--judge-responder data_synth.env.canned:nope: module"):
        preflight(LLMConfig(responder="data_synth.env.canned:nope"), flags=LLMFlags("judge"))
    with pytest.raises(LLMSettingsError, match="--responder data_synth.env.canned:__name__: str is not callable"):
        preflight(LLMConfig(responder="data_synth.env.canned:__name__"))
    rules = tmp_path / "rules.jsonl"
    rules.write_text('{"match": "x"}\n{oops\n')
    with pytest.raises(PreflightError, match=r"--scripted .*rules.jsonl: .*rules.jsonl:2: not JSON"):
        preflight(LLMConfig(scripted=str(rules)))
    with pytest.raises(PreflightError, match="no LLM endpoint: pass --base-url"):
        preflight(LLMConfig(model="m"))
