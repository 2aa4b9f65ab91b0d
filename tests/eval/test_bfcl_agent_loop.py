"""BFCL entries through the real `astra_tool_agent` (scripted hermes turns), scored by `astra_bfcl`."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict
from verl import DataProto
from verl.experimental.reward_loop.reward_manager import get_reward_manager_cls

from astra_verl.calls.call_log import EpisodeLog, Termination
from astra_verl.eval import bfcl_replay
from astra_verl.rollout.testing import run
from env_registry.call_gate import CallStatus


def as_sample(row: dict, extra_fields: dict) -> DataProto:
    """One trajectory as verl hands it to a reward worker."""
    prompts, responses = torch.tensor([[1, 2]]), torch.tensor([[3]])
    batch = TensorDict(
        {"prompts": prompts, "responses": responses, "attention_mask": torch.ones(1, 3, dtype=torch.int64)},
        batch_size=1,
    )

    def cell(value):
        out = np.empty(1, dtype=object)
        out[0] = value
        return out

    non_tensor = {
        "uid": cell("u-1"),
        "data_source": cell(row["data_source"]),
        "reward_model": cell(row["reward_model"]),
        "extra_info": cell(row["extra_info"]),
        "tool_extra_fields": cell(extra_fields),
    }
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


def test_a_miss_func_entry_runs_in_the_agent_loop_and_astra_bfcl_accepts_it(loop_kit, bfcl_sample):
    config, tokenizer = loop_kit
    index = bfcl_sample.index["multi_turn_miss_func_0"]
    entry, row = bfcl_sample.data.entries[index], bfcl_sample.data.rows[index]
    script = bfcl_replay.hermes_script(bfcl_replay.turn_calls(entry))
    out = run(bfcl_replay.run_loop_episode(config, tokenizer, row, script))
    log = EpisodeLog.from_extra_fields(out.extra_fields)
    assert log.hook == "bfcl_multi_turn" and log.terminated_by is Termination.NO_TOOL_CALL
    assert log.user_turns == len(entry.turns) - 1 == log.hook_state["user_turns_listed"]
    assert all(c.status is CallStatus.OK for c in log.calls)
    assert [c.tool for c in log.calls if c.tool == "sort"] == ["sort"]  # revealed at turn 3, then called
    decoded = tokenizer.decode(out.prompt_ids + out.response_ids)
    assert "I have updated some more functions you can choose from. What about now?" in decoded
    # the user turns and tool outputs are context (mask 0); only the scripted assistant text is trained on
    assert sum(out.response_mask) < len(out.response_mask)

    manager = get_reward_manager_cls("astra_bfcl")(config=config, tokenizer=tokenizer, compute_score=None)
    result = manager.loop.run_until_complete(manager.run_single(as_sample(row, out.extra_fields)))
    assert result["reward_score"] == 1.0, result
    assert result["reward_extra_info"]["bfcl_valid"] == 1.0 and result["reward_extra_info"]["bfcl_turns"] == 5.0

    broken = bfcl_replay.hermes_script(bfcl_replay.wrong_calls(entry))
    out = run(bfcl_replay.run_loop_episode(config, tokenizer, row, broken))
    result = manager.loop.run_until_complete(manager.run_single(as_sample(row, out.extra_fields)))
    assert result["reward_score"] == 0.0


def test_the_step_limit_force_quits_in_the_agent_loop(loop_kit, bfcl_sample):
    config, tokenizer = loop_kit
    index = bfcl_sample.index["multi_turn_base_1"]
    row = bfcl_sample.data.rows[index]
    ls = '<tool_call>\n{"name": "ls", "arguments": {"a": true}}\n</tool_call>'
    out = run(bfcl_replay.run_loop_episode(config, tokenizer, row, [ls] * 30))
    log = EpisodeLog.from_extra_fields(out.extra_fields)
    assert log.terminated_by is Termination.HOOK and log.assistant_turns == 21  # BFCL: quit after step 21
    assert log.hook_state["force_quit"] and log.user_turns == 0
    manager = get_reward_manager_cls("astra_bfcl")(config=config, tokenizer=tokenizer, compute_score=None)
    result = manager.loop.run_until_complete(manager.run_single(as_sample(row, out.extra_fields)))
    assert result["reward_score"] == 0.0 and result["reward_extra_info"]["bfcl_force_quit"] == 1.0


def test_astra_bfcl_refuses_a_sandbox_without_bfcl_and_rows_from_elsewhere(loop_kit, bfcl_sample):
    from omegaconf import OmegaConf

    from astra_verl.reward.managers import RewardInputError

    config, tokenizer = loop_kit
    cls = get_reward_manager_cls("astra_bfcl")
    plain = OmegaConf.merge(config, {"astra": {"sandbox": {"packages": []}}})
    with pytest.raises(ValueError, match="astra.sandbox.packages"):
        cls(config=plain, tokenizer=tokenizer, compute_score=None)
    manager = cls(config=config, tokenizer=tokenizer, compute_score=None)
    row = bfcl_sample.data.rows[0]
    other = EpisodeLog(env_id="x", hook="astra_default").to_extra_fields()
    with pytest.raises(RewardInputError, match="not 'bfcl_multi_turn'"):
        manager.loop.run_until_complete(manager.run_single(as_sample(row, other)))
    with pytest.raises(RewardInputError, match="BfclTarget"):
        manager.loop.run_until_complete(
            manager.run_single(as_sample({**row, "reward_model": {"ground_truth": '{"env_id": "x"}'}}, other))
        )
