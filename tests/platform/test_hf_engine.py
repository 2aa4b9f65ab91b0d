"""hf_cpu engine: batched decoding equals unbatched, log-probs are the model's, weight updates are all-or-error."""

from __future__ import annotations

import pytest
import torch

from astra_verl.platform.hf_engine import GenerationRequest, HFEngine
from astra_verl.platform.sampling import SamplingParams, filter_top_k_top_p


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    return HFEngine(str(tiny_model_dir), eos_token_ids=[])


def _recomputed_logprobs(engine, request, tokens):
    """Log-probs of `tokens` after the prompt, from one unpadded full forward (the trainer's view)."""
    ids = torch.tensor([request.prompt_ids + tokens])
    with torch.no_grad():
        logits = engine.model(ids).logits[0].float()
    start = len(request.prompt_ids) - 1
    p = request.params
    out = []
    for i, token in enumerate(tokens):
        row = logits[start + i]
        if not p.greedy:
            row = filter_top_k_top_p((row / p.temperature)[None], torch.tensor([p.top_k]), torch.tensor([p.top_p]))[0]
        out.append(float(row.log_softmax(-1)[token]))
    return out, logits


def test_a_padded_batch_decodes_like_each_prompt_alone(engine):
    requests = [
        GenerationRequest([5, 6, 7, 8, 9], SamplingParams(temperature=0, logprobs=True), 12),
        GenerationRequest([10, 11], SamplingParams(temperature=1.0, top_k=5, logprobs=True, seed=3), 7),
        GenerationRequest(list(range(20, 34)), SamplingParams(temperature=0.7, top_p=0.9, logprobs=True), 20),
    ]
    results = engine.generate_batch(requests)
    for request, result in zip(requests, results, strict=True):
        assert len(result.token_ids) == request.max_tokens and result.finish_reason == "length"
        expected, logits = _recomputed_logprobs(engine, request, result.token_ids)
        assert result.log_probs == pytest.approx(expected, abs=1e-4)
        if request.params.greedy:
            start = len(request.prompt_ids) - 1
            assert result.token_ids == [int(logits[start + i].argmax()) for i in range(len(result.token_ids))]
    alone = engine.generate_batch(requests[1:2])[0]
    assert alone.token_ids == results[1].token_ids  # seeded: the batch does not change a row's draws


def test_stop_tokens_and_eos_end_a_row_and_are_returned(engine, tiny_model_dir):
    request = GenerationRequest([5, 6, 7], SamplingParams(temperature=0), 30)
    free = engine.generate_batch([request])[0].token_ids
    stop = free[3]
    stopped = engine.generate_batch(
        [GenerationRequest([5, 6, 7], SamplingParams(temperature=0, stop_token_ids=frozenset({stop})), 30)]
    )[0]
    assert stopped.token_ids == free[: free.index(stop) + 1] and stopped.finish_reason == "stop"

    eos_engine = HFEngine(str(tiny_model_dir), eos_token_ids=[stop])
    assert eos_engine.generate_batch([request])[0].token_ids == stopped.token_ids
    ignoring = GenerationRequest([5, 6, 7], SamplingParams(temperature=0, ignore_eos=True), 30)
    assert eos_engine.generate_batch([ignoring])[0].token_ids == free
    assert engine.generate_batch([request])[0].log_probs is None  # only when asked for


def test_a_full_weight_update_changes_generation_and_reports_its_checksum(tiny_model_dir):
    engine = HFEngine(str(tiny_model_dir), eos_token_ids=[])
    request = GenerationRequest([5, 6, 7, 8], SamplingParams(temperature=0, logprobs=True), 8)
    before = engine.generate_batch([request])[0]
    torch.manual_seed(123)
    new = HFEngine(str(tiny_model_dir), load_format="dummy").model.state_dict()  # other weights, ties intact
    engine.begin_weight_update()
    assert engine.load_weights(new.items()) == len(new)
    checksum = engine.finish_weight_update()
    after = engine.generate_batch([request])[0]
    assert after.log_probs != before.log_probs
    reference = HFEngine(str(tiny_model_dir), eos_token_ids=[])
    reference.model.load_state_dict(new)
    assert reference.generate_batch([request])[0].log_probs == pytest.approx(after.log_probs, abs=1e-5)
    assert reference.checksum() == checksum


def test_partial_unknown_or_misshapen_updates_are_errors(tiny_model_dir):
    engine = HFEngine(str(tiny_model_dir), eos_token_ids=[])
    state = engine.model.state_dict()
    engine.begin_weight_update()
    engine.load_weights([("model.norm.weight", state["model.norm.weight"])])
    with pytest.raises(RuntimeError, match="incomplete"):
        engine.finish_weight_update()
    engine.begin_weight_update()
    with pytest.raises(KeyError, match="model.nope"):
        engine.load_weights([("model.nope", torch.zeros(1))])
    with pytest.raises(ValueError, match="shape"):
        engine.load_weights([("model.norm.weight", torch.zeros(3))])
    with pytest.raises(RuntimeError, match="outside"):
        HFEngine(str(tiny_model_dir)).load_weights([])


def test_released_weights_refuse_generation_until_a_complete_update(tiny_model_dir):
    engine = HFEngine(str(tiny_model_dir), eos_token_ids=[])
    request = GenerationRequest([5, 6, 7], SamplingParams(temperature=0), 4)
    expected = engine.generate_batch([request])[0].token_ids
    state = {k: v.clone() for k, v in engine.model.state_dict().items()}
    engine.release_weights()
    assert next(engine.model.parameters()).numel() == 0  # the memory is really given back
    with pytest.raises(RuntimeError, match="released"):
        engine.generate_batch([request])
    engine.allocate_weights()
    with pytest.raises(RuntimeError, match="released"):
        engine.generate_batch([request])  # allocated but not yet filled
    engine.begin_weight_update()
    engine.load_weights(state.items())
    engine.finish_weight_update()
    assert engine.generate_batch([request])[0].token_ids == expected
