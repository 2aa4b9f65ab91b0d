"""What every GGUF-sourced model shares: read the file's tokenizer metadata, build a Hugging Face
tokenizer with astra-verl's tool chat template, dequantize the weights and write the checkpoint.

A model module (`smollm2`, `qwen_coder`) says where its GGUF file comes from, which
pre-tokenizer its GGUF rule needs, and what its spec (OUT/astra_model.json) records; `write`
does the rest. transformers reads GGUF files with the `gguf` package and dequantizes them to
float32 (Q4_0/Q4_1/Q4_K/Q5_0/Q5_K/Q6_K/Q8_0 among others).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import AddedToken, decoders, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from astra_verl.models.errors import BuildError, MissingExtraError
from astra_verl.models.gguf_split import sha256_file
from astra_verl.tiny_model import chat_template

__all__ = ["BuildError", "GGUFVocab", "MissingExtraError", "build_tokenizer", "read_vocab", "sha256_file", "write"]

MARKER = "astra_model.json"
# GGUF token types (llama.cpp's enum): 3 marks control tokens, which become special tokens; 4
# user-defined ones (Qwen's `<tool_call>`), which stay single tokens but are not special.
_GGUF_CONTROL = 3
_GGUF_USER_DEFINED = 4
_END_OF_TEXT = "<|endoftext|>"


@dataclass(frozen=True)
class GGUFVocab:
    """What a GGUF file's tokenizer metadata declares beyond the vocabulary itself."""

    bos: str
    eos: str
    unk: str | None
    pad: str
    control: tuple[str, ...]
    user_defined: tuple[str, ...]
    size: int
    pre: str


def _gguf_module(install: str):
    # gguf is an optional extra: imported only when a conversion runs.
    try:
        import gguf
    except ImportError:
        raise MissingExtraError(f"the GGUF reader (package 'gguf') is not installed; {install}") from None
    return gguf


def read_vocab(path: Path, install: str) -> GGUFVocab:
    """The special tokens, control tokens and pre-tokenizer rule of a GGUF file (`install` says how
    to get the reader when it is missing)."""
    reader = _gguf_module(install).GGUFReader(str(path))

    def field(key: str, required: bool = True):
        if key not in reader.fields:
            if not required:
                return None
            raise ValueError(f"{path}: the GGUF metadata has no {key!r}; is this a chat model's GGUF file?")
        return reader.fields[key].contents()

    tokens = field("tokenizer.ggml.tokens")
    types = field("tokenizer.ggml.token_type")
    unk = field("tokenizer.ggml.unknown_token_id", required=False)  # Qwen's byte-level BPE has none
    return GGUFVocab(
        bos=tokens[field("tokenizer.ggml.bos_token_id")],
        eos=tokens[field("tokenizer.ggml.eos_token_id")],
        unk=None if unk is None else tokens[unk],
        pad=tokens[field("tokenizer.ggml.padding_token_id")],
        control=tuple(t for t, kind in zip(tokens, types, strict=True) if kind == _GGUF_CONTROL),
        user_defined=tuple(t for t, kind in zip(tokens, types, strict=True) if kind == _GGUF_USER_DEFINED),
        size=len(tokens),
        pre=field("tokenizer.ggml.pre"),
    )


# A GGUF `tokenizer.ggml.pre` rule -> the Hugging Face pre-tokenizer with the same splits, or None
# where transformers' GGUF import already sets the right one.
PreTokenizers = dict[str, Callable[[], pre_tokenizers.PreTokenizer] | None]


def build_tokenizer(path: Path, vocab: GGUFVocab, pre: PreTokenizers, context_length: int):
    """The GGUF file's tokenizer with its own special tokens and astra-verl's tool template."""
    if vocab.pre not in pre:
        raise ValueError(f"{path.name}: no Hugging Face pre-tokenizer is known for the GGUF rule {vocab.pre!r}")
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    if (rule := pre[vocab.pre]) is not None:
        tokenizer.backend_tokenizer.pre_tokenizer = rule()
    tokenizer.backend_tokenizer.decoder = decoders.ByteLevel()
    named = {"bos_token": vocab.bos, "eos_token": vocab.eos, "pad_token": vocab.pad}
    if vocab.unk is not None:
        named["unk_token"] = vocab.unk
    named_set = set(named.values())
    tokenizer.add_special_tokens(
        {**named, "additional_special_tokens": [t for t in vocab.control if t not in named_set]}
    )
    # transformers' GGUF import splits these as text; the model was trained on them as one token each
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in vocab.user_defined])
    tokenizer.chat_template = chat_template()
    tokenizer.model_max_length = context_length
    tokenizer.clean_up_tokenization_spaces = False  # byte-level BPE decodes exactly; cleanup would edit text
    if len(tokenizer) != vocab.size:
        raise RuntimeError(
            f"{path.name}: the tokenizer has {len(tokenizer)} tokens, the GGUF file {vocab.size}; "
            "a special token was added instead of found"
        )
    newline = tokenizer.encode("\n", add_special_tokens=False)
    if len(newline) != 1:
        raise RuntimeError(f"{path.name}: '\\n' encodes as {newline}; verl's ChatML token builder needs one token")
    return tokenizer


def write(path: Path, out: Path, spec: dict, vocab: GGUFVocab, tokenizer) -> Path:
    """Dequantize the GGUF weights and write model, tokenizer, generation config and marker."""
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in (vocab.bos, vocab.eos, vocab.pad)}
    model.config.update(
        {"bos_token_id": ids[vocab.bos], "eos_token_id": ids[vocab.eos], "pad_token_id": ids[vocab.pad]}
    )
    # A turn ends at <|im_end|>; <|endoftext|> (the document end) ends one too.
    stops = [ids[vocab.eos]] + [
        tokenizer.convert_tokens_to_ids(t) for t in vocab.control if t == _END_OF_TEXT and t != vocab.eos
    ]
    model.generation_config = GenerationConfig(
        bos_token_id=ids[vocab.bos], eos_token_id=stops, pad_token_id=ids[vocab.pad]
    )
    out.mkdir(parents=True, exist_ok=True)
    marker = out / MARKER
    marker.unlink(missing_ok=True)  # a conversion cut short leaves no marker, so the next run redoes it
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    marker.write_text(json.dumps(spec, indent=1) + "\n")
    return out


def is_built(out: Path, spec: dict) -> bool:
    """Whether `out` was built from exactly these inputs (its marker records them)."""
    marker = out / MARKER
    return marker.is_file() and json.loads(marker.read_text()) == spec
