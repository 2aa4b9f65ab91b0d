"""The locally built tiny model works with verl's Qwen token builder and hermes tool parser."""

from __future__ import annotations

import json


def test_newline_is_one_token_and_template_renders_tools(tiny_tokenizer):
    assert len(tiny_tokenizer.encode("\n", add_special_tokens=False)) == 1
    tools = [{"type": "function", "function": {"name": "get_x", "description": "d", "parameters": {"type": "object"}}}]
    messages = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_x", "arguments": {"a": 1}}}],
        },
        {"role": "tool", "content": "42"},
    ]
    text = tiny_tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    assert '"name": "get_x"' in text and "<tools>" in text
    assert (
        '<|im_start|>assistant\n<tool_call>\n{"name": "get_x", "arguments": {"a": 1}}\n</tool_call><|im_end|>' in text
    )
    assert "<tool_response>\n42\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")
    # the tag tokens survive decoding (the hermes parser looks for them)
    ids = tiny_tokenizer.encode(
        '<tool_call>\n{"name": "get_x", "arguments": {}}\n</tool_call>', add_special_tokens=False
    )
    assert "<tool_call>" in tiny_tokenizer.decode(ids, skip_special_tokens=True)


def test_verl_qwen_builder_accepts_the_tiny_tokenizer(tiny_tokenizer):
    from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

    builder = create_continuous_token_builder(tiny_tokenizer, hf_model_type="qwen2")
    ids = builder.build_initial_tokens([{"role": "user", "content": "hello"}], tools=None)
    assert tiny_tokenizer.decode(ids).endswith("<|im_start|>assistant\n")


def test_model_loads_and_generates(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    out = model.generate(torch.tensor([[1, 2, 3]]), max_new_tokens=4, do_sample=False)
    assert out.shape[1] >= 4
    meta = json.loads((tiny_model_dir / "astra_tiny.json").read_text())
    assert meta["hidden_size"] == 128
