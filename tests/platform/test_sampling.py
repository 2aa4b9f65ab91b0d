"""hf_cpu sampling: verl's vLLM-style params are honoured exactly, and anything else is refused by name."""

from __future__ import annotations

import pytest
import torch

from astra_verl.platform.sampling import SamplingParams, apply_repetition_penalty, filter_top_k_top_p, sample_next


def test_params_from_a_verl_agent_loop_request():
    # what AgentLoopWorker + ToolAgentLoop send
    params = SamplingParams.from_request(
        {
            "temperature": 0.7,
            "top_p": 0.9,
            "top_k": 20,
            "repetition_penalty": 1.0,
            "logprobs": True,
            "stop_token_ids": [5, 7],
        }
    )
    assert (params.temperature, params.top_p, params.top_k, params.logprobs) == (0.7, 0.9, 20, True)
    assert params.stop_token_ids == frozenset({5, 7})
    assert params.max_tokens is None
    assert SamplingParams.from_request({"max_new_tokens": 3}).max_tokens == 3  # sglang spelling


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"presence_penalty": 0.5}, "unsupported sampling parameter"),
        ({"temperature": -1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": 2, "max_new_tokens": 2}, "not both"),
        ({"repetition_penalty": 0}, "repetition_penalty"),
    ],
)
def test_bad_params_are_refused_with_the_key_named(bad, message):
    with pytest.raises(ValueError, match=message):
        SamplingParams.from_request(bad)


def test_top_k_keeps_exactly_k_and_top_p_the_smallest_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05], [0.5, 0.3, 0.15, 0.05]]))
    out = filter_top_k_top_p(logits, top_k=torch.tensor([2, -1]), top_p=torch.tensor([1.0, 0.8]))
    kept = torch.isfinite(out)
    assert kept[0].tolist() == [True, True, False, False]  # top-2
    assert kept[1].tolist() == [True, True, False, False]  # 0.5 + 0.3 reaches 0.8
    tight = filter_top_k_top_p(logits[:1], top_k=torch.tensor([-1]), top_p=torch.tensor([0.1]))
    assert torch.isfinite(tight).tolist() == [[True, False, False, False]]  # the best token always stays


def test_greedy_rows_take_the_argmax_and_sampled_rows_follow_their_seed():
    torch.manual_seed(0)
    logits = torch.randn(3, 50)
    logits[2] = logits[1]
    greedy = SamplingParams(temperature=0)
    seeded = SamplingParams(temperature=1.0, seed=11)
    gens = [None, torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)]
    tokens, _ = sample_next(logits, [greedy, seeded, seeded], None, gens)
    assert tokens[0] == logits[0].argmax()
    assert tokens[1] == tokens[2]  # same seed, same draw
    fresh = [None, torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)]
    again, _ = sample_next(logits, [greedy, seeded, seeded], None, fresh)
    assert torch.equal(tokens, again)


def test_logprobs_are_of_the_processed_or_the_raw_distribution():
    torch.manual_seed(1)
    logits = torch.randn(1, 30)
    params = [SamplingParams(temperature=0.5, top_k=5, seed=3)]
    gen = [torch.Generator().manual_seed(3)]
    token, processed = sample_next(logits, params, None, gen, logprobs_mode="processed_logprobs")
    expected = filter_top_k_top_p(logits / 0.5, torch.tensor([5]), torch.tensor([1.0])).log_softmax(-1)[0, token]
    assert torch.allclose(processed, expected)
    token2, raw = sample_next(logits, params, None, [torch.Generator().manual_seed(3)], logprobs_mode="raw_logprobs")
    assert token2 == token
    assert torch.allclose(raw, logits.log_softmax(-1)[0, token])
    with pytest.raises(ValueError, match="logprobs_mode"):
        sample_next(logits, params, None, gen, logprobs_mode="prompt_logprobs")


def test_repetition_penalty_divides_positive_and_multiplies_negative_seen_logits():
    logits = torch.tensor([[2.0, -2.0, 1.0]])
    seen = torch.tensor([[True, True, False]])
    out = apply_repetition_penalty(logits, seen, torch.tensor([2.0]))
    assert out.tolist() == [[1.0, -4.0, 1.0]]
