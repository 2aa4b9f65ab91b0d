"""One greedy turn of the real SmolLM2-135M-Instruct through `astra_tool_agent` (no Ray, no server)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from verl.utils.tokenizer.continuous_token import QwenContinuousTokenBuilder

from astra_verl.calls.call_log import EpisodeLog
from astra_verl.rollout.testing import ModelServer, close_worker_context, compose_trainer_config, make_loop, run

pytestmark = pytest.mark.slow


def test_one_greedy_turn(smollm2_dir, envs, kit):
    tokenizer = AutoTokenizer.from_pretrained(str(smollm2_dir))
    model = AutoModelForCausalLM.from_pretrained(str(smollm2_dir)).eval()
    torch.set_num_threads(2)
    close_worker_context()  # another module's loops may have opened its sandbox with other settings
    cfg = compose_trainer_config(
        str(smollm2_dir),
        [
            "actor_rollout_ref.rollout.prompt_length=2048",
            "actor_rollout_ref.rollout.response_length=512",
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=1",
            "actor_rollout_ref.rollout.multi_turn.format=hermes",
        ],
    )
    try:
        _greedy_turn_twice(cfg, model, tokenizer, envs, kit)
    finally:
        close_worker_context()  # the next module's loops open the sandbox with their own settings


def _greedy_turn_twice(cfg, model, tokenizer, envs, kit):
    server = ModelServer(model, tokenizer, max_new_tokens=48)
    loop = make_loop(cfg, server, tokenizer, hf_model_type=model.config.model_type)
    assert isinstance(loop.continuous_token_builder, QwenContinuousTokenBuilder)  # ChatML boundaries
    out = run(loop.run({"temperature": 0.0}, **kit.row_kwargs(envs.city, envs.store)))

    log = EpisodeLog.from_extra_fields(out.extra_fields)
    (turns,) = server.emitted.values()
    assert log.assistant_turns == 1 and len(turns) == 1 and log.terminated_by is not None
    assert list(out.response_ids) == turns[0] and all(out.response_mask)
    prompt = tokenizer.decode(out.prompt_ids)
    assert '"name": "get_population"' in prompt and prompt.endswith("<|im_start|>assistant\n")
    reply = tokenizer.decode(turns[0], skip_special_tokens=True)
    assert reply.strip(), "the model said nothing"
    print(f"SmolLM2's greedy turn ({log.terminated_by}, {len(log.calls)} calls): {reply!r}")
    # greedy is deterministic: the same turn again
    again = ModelServer(model, tokenizer, max_new_tokens=48)
    run(
        make_loop(cfg, again, tokenizer, hf_model_type="llama").run(
            {"temperature": 0.0}, **kit.row_kwargs(envs.city, envs.store)
        )
    )
    assert list(again.emitted.values()) == [turns]
