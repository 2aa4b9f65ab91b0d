"""A ChatML template on an architecture verl maps to its generic token builder (SmolLM2 is a
`llama`): `astra_tool_agent` still rolls out the newline the template writes after `<|im_end|>`."""

from __future__ import annotations

import pytest
from verl.utils.tokenizer.continuous_token import ContinuousTokenBuilder, QwenContinuousTokenBuilder

from astra_verl.rollout.chatml import chatml_builder, renders_chatml
from astra_verl.rollout.testing import ScriptedServer, make_loop, run


@pytest.fixture(scope="module")
def cfg(trainer_config):
    return trainer_config()


def turn_boundaries(tokenizer, ids: list[int]) -> list[int]:
    """The token after each `<|im_end|>` that does not end the sequence."""
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    return [ids[i + 1] for i, t in enumerate(ids[:-1]) if t == im_end]


@pytest.mark.parametrize("model_type", ["llama", "qwen2"])
def test_tool_turns_follow_a_newline_whatever_the_architecture(cfg, tiny_tokenizer, envs, kit, model_type):
    script = [kit.call_text("get_population", {"city": "Paris"}), "About 2.1 million."]
    server = ScriptedServer(tiny_tokenizer, script)
    loop = make_loop(cfg, server, tiny_tokenizer, hf_model_type=model_type)
    assert isinstance(loop.continuous_token_builder, QwenContinuousTokenBuilder)
    out = run(loop.run({"temperature": 1.0}, **kit.row_kwargs(envs.city, envs.store)))
    ids = list(out.prompt_ids) + list(out.response_ids)
    newline = tiny_tokenizer.encode("\n", add_special_tokens=False)
    # after the system turn, the user turn, the assistant's call and the tool turn: a newline each
    assert turn_boundaries(tiny_tokenizer, ids) == newline * 4
    # the newline put back after the generated <|im_end|> is not the model's token (mask 0)
    end = out.response_ids.index(tiny_tokenizer.convert_tokens_to_ids("<|im_end|>"))
    assert out.response_mask[end] == 1 and out.response_mask[end + 1] == 0


def test_builder_kept_for_templates_that_are_not_chatml(tiny_tokenizer):
    generic = ContinuousTokenBuilder(tiny_tokenizer)
    assert renders_chatml(tiny_tokenizer)
    assert isinstance(chatml_builder(generic, tiny_tokenizer), QwenContinuousTokenBuilder)

    class Plain:
        """A tokenizer whose template writes no ChatML."""

        def apply_chat_template(self, messages, tokenize=False, **kw):
            return "".join(f"[{m['role']}] {m['content']}\n" for m in messages)

    plain = Plain()
    assert not renders_chatml(plain)
    assert chatml_builder(generic, plain) is generic
    qwen = QwenContinuousTokenBuilder(tiny_tokenizer)
    assert chatml_builder(qwen, tiny_tokenizer) is qwen  # verl's own choice stands
