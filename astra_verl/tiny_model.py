"""A tiny Qwen2-style model and tokenizer built locally, for laptop runs, tests and smoke checks.

Nothing is downloaded: a byte-level BPE is trained on a small built-in corpus and the model's
weights are random (seeded). The tokenizer carries a Qwen2.5-style chat template that renders
tool schemas and `<tool_call>` tags, so verl's Qwen token builder and hermes tool parser work
on it unchanged. The shape follows what verl and vLLM accept on CPU (head_dim 64; "\\n" is one
token, which verl's Qwen builder requires).

    python -m astra_verl.tiny_model runs/tiny-model
"""

from __future__ import annotations

import argparse
import json
from importlib import resources
from pathlib import Path

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Added but not special: decoding with skip_special_tokens keeps them, as in Qwen2.5.
TOOL_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
BUILD_VERSION = "1"


def chat_template() -> str:
    return resources.files("astra_verl").joinpath("chat_template.jinja").read_text(encoding="utf-8")


def _corpus() -> list[str]:
    # Enough structure for merges that make chat and JSON text short; byte-level BPE covers
    # every byte anyway, so any text is encodable.
    words = (
        "the of and to in is a that for it as was with be by on not he this are or his from at which "
        "but have an they you were her she there been one all we their has would when if so no what "
        "function name arguments description parameters type object string number integer boolean array "
        "properties required enum items tool call response user assistant system question answer result "
        "value error unknown invalid city date price total count average sum population temperature "
        "distance weight height year month day hour minute rate percent amount currency unit id code"
    ).split()
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    lines += [json.dumps({"name": w, "arguments": {"query": w, "limit": i}}) for i, w in enumerate(words)]
    lines += [f"{i} {i * 7} {i / 3:.4f} -{i}.5 1e{i % 9}" for i in range(200)]
    lines += ['{"type": "function", "function": {"name": "get_x", "parameters": {"type": "object"}}}'] * 20
    return lines * 4


def build_tokenizer(vocab_size: int = 2048):
    """A transformers fast tokenizer with our chat template; deterministic."""
    # Lazy (here and below): tokenizers, transformers and torch are heavy; tests import this module early.
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
    )
    fast.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS})
    fast.add_tokens(TOOL_TOKENS, special_tokens=False)
    fast.chat_template = chat_template()
    fast.model_max_length = 32768
    newline = fast.encode("\n", add_special_tokens=False)
    if len(newline) != 1:
        raise RuntimeError(f"tiny tokenizer encodes '\\n' as {newline}; verl's Qwen token builder needs one token")
    return fast


def build_model_config(vocab_size: int, hidden_size: int = 128, num_layers: int = 2, max_positions: int = 8192):
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=hidden_size // 64,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        torch_dtype="float32",
    )


def build(out_dir: str | Path, seed: int = 0, hidden_size: int = 128, num_layers: int = 2) -> Path:
    """Write tokenizer, config and random weights to `out_dir` (reused when already built)."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    out = Path(out_dir)
    marker = out / "astra_tiny.json"
    spec = {"build_version": BUILD_VERSION, "seed": seed, "hidden_size": hidden_size, "num_layers": num_layers}
    if marker.exists() and json.loads(marker.read_text()) == spec:
        return out
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(out)
    config = build_model_config(len(tokenizer), hidden_size=hidden_size, num_layers=num_layers)
    config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    config.pad_token_id = tokenizer.pad_token_id
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(
        eos_token_id=[config.eos_token_id, tokenizer.convert_tokens_to_ids("<|endoftext|>")],
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
    ).save_pretrained(out)
    marker.write_text(json.dumps(spec))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m astra_verl.tiny_model",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("out_dir", help="folder to write the tokenizer, config and weights to")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden-size", type=int, default=128, help="multiple of 64 (head_dim is 64)")
    parser.add_argument("--num-layers", type=int, default=2)
    args = parser.parse_args(argv)
    path = build(args.out_dir, seed=args.seed, hidden_size=args.hidden_size, num_layers=args.num_layers)
    print(f"tiny model written to {path}")


if __name__ == "__main__":
    main()
