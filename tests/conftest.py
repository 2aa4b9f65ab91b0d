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
