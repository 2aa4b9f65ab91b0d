"""ChatML turn boundaries for checkpoints whose architecture verl does not map to a ChatML builder.

verl picks a multi-turn rollout's token builder by the checkpoint's `model_type`: `qwen2`,
`qwen3`, ... get its ChatML builder, which puts back the newline a ChatML template writes after
`<|im_end|>` when generation stopped at that token. Any other architecture gets the generic
builder, which appends the next tool or user turn right after the `<|im_end|>`. A ChatML model
on another architecture (SmolLM2, a `llama`, with astra-verl's template) would then roll out
`<|im_end|><|im_start|>user` where the rendered conversation, and so its SFT data, has
`<|im_end|>\\n<|im_start|>user`. `chatml_builder` swaps in verl's ChatML builder for a tokenizer
whose template renders ChatML turns, and keeps verl's choice otherwise.
"""

from __future__ import annotations

from typing import Any

from verl.utils.tokenizer.continuous_token import ContinuousTokenBuilder
from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

_PROBE = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
_CHATML_BOUNDARY = "<|im_end|>\n<|im_start|>"


def renders_chatml(tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> bool:
    """Whether the tokenizer's chat template ends a turn with `<|im_end|>` and a newline."""
    text = tokenizer.apply_chat_template(_PROBE, tokenize=False, **(chat_template_kwargs or {}))
    return _CHATML_BOUNDARY in text


def chatml_builder(builder: Any, tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> Any:
    """verl's ChatML builder when verl fell back to its generic one for a ChatML template."""
    if type(builder) is not ContinuousTokenBuilder or not renders_chatml(tokenizer, chat_template_kwargs):
        return builder
    return create_continuous_token_builder(tokenizer, model_family="qwen", chat_template_kwargs=chat_template_kwargs)
