"""Scoring with BFCL's checker in the sandbox: decoding, BFCL's termination rule, hostile calls."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from astra_foundation.sandbox import SandboxConfig, SandboxPool
from astra_verl.benchmarks.bfcl_score import (
    BfclScoringError,
    call_string,
    check_sandbox_config,
    decode_episode,
    precheck,
    score_episode,
)
from astra_verl.calls.call_log import CallRecord, EpisodeLog, Termination
from astra_verl.rollout.call_parsing import BFCL_SKIPPED
from env_registry.call_gate import CallStatus


def rec(turn: int, tool: str, args, status: CallStatus = CallStatus.OK, index: int = 0) -> CallRecord:
    return CallRecord(turn=turn, index=index, tool=tool, arguments=args, status=status)


def episode(target, calls, starts, *, delivered=None, force_quit=False, terminated=Termination.NO_TOOL_CALL):
    # the episode's count: user turns after the prompt's
    user_turns = (len(starts) if delivered is None else delivered) - 1
    log = EpisodeLog(
        env_id=target.env_id, calls=calls, hook="bfcl_multi_turn", terminated_by=terminated, user_turns=user_turns
    )
    log.hook_state = {
        "turn_starts": starts,
        "user_turns_listed": len(target.ground_truth) - 1,
        "steps_per_turn": [1] * len(starts),
        "force_quit": force_quit,
        "call_style": "prompt",
    }
    return log


def test_call_strings_are_bfcls_decoded_form():
    assert call_string("cd", {"folder": "document"}) == "cd(folder='document')"
    assert call_string("f", {"a": 1.5, "b": [1, "x"], "c": None, "d": True}) == "f(a=1.5,b=[1, 'x'],c=None,d=True)"
    assert call_string("ls", {}) == "ls()"


def test_decoding_groups_calls_by_user_turn_and_step_and_keeps_what_bfcl_would_execute():
    log = EpisodeLog(env_id="e", hook="bfcl_multi_turn")
    log.calls = [
        rec(1, "cd", {"folder": "a"}),
        rec(1, "ls", {}, index=1),
        rec(2, "cat", {"file_name": "x"}, CallStatus.TOOL_ERROR),
        rec(2, "nope", {"q": 1}, CallStatus.UNKNOWN_TOOL, index=1),  # BFCL evals it too (a NameError)
        rec(2, "cat", "{not json", CallStatus.BAD_JSON, index=2),  # BFCL's Qwen handler skips the block
        rec(4, "mv", {"source": "a", "destination": "b"}, CallStatus.SCHEMA_ERROR),
        rec(4, "ls", {}, CallStatus.SKIPPED, index=1),  # past our call cap, never executed: BFCL runs it
    ]
    log.calls[4].error_kind = BFCL_SKIPPED
    log.hook_state = {"turn_starts": [1, 4, 6], "call_style": "prompt"}
    assert decode_episode(log) == [
        [["cd(folder='a')", "ls()"], ["cat(file_name='x')", "nope(q=1)"]],
        [["mv(source='a',destination='b')", "ls()"]],
        [],
    ]


def test_an_episode_without_the_hooks_state_cannot_be_scored():
    with pytest.raises(BfclScoringError, match="turn_starts"):
        decode_episode(EpisodeLog(env_id="e", hook="astra_default"))


def test_bfcls_force_termination_rule_and_our_truncation(bfcl_sample):
    target = bfcl_sample.data.targets[bfcl_sample.index["multi_turn_base_0"]]  # 4 turns
    assert precheck(target, episode(target, [], [1, 3, 5, 7])).valid
    quit_ = precheck(target, episode(target, [], [1, 3], force_quit=True, terminated=Termination.HOOK))
    assert not quit_.valid and quit_.error_type == "multi_turn:force_terminated"
    assert "(2) does not match the length of the ground truth turns (4)" in quit_.error_message
    cut = precheck(target, episode(target, [], [1, 3, 5], terminated=Termination.MAX_LENGTH))
    assert cut.error_type == "astra:episode_truncated" and "max_length" in cut.error_message
    assert cut.extra_info()["bfcl_truncated"] == 1.0 and cut.extra_info()["bfcl_valid"] == 0.0
    with pytest.raises(BfclScoringError, match="ground truth is for"):
        precheck(target, EpisodeLog(env_id="other"))
    with pytest.raises(BfclScoringError, match="exported with bfcl-eval 2000.1.1"):
        precheck(target.model_copy(update={"bfcl_version": "2000.1.1"}), episode(target, [], [1, 3, 5, 7]))


def test_the_user_turns_are_the_episodes_one_counter(bfcl_sample):
    """The scorer reads `EpisodeLog.user_turns` (what entered the conversation), never a hook's
    count read with a default of 0: a state without one is no truncated episode."""
    target = bfcl_sample.data.targets[bfcl_sample.index["multi_turn_base_0"]]  # 4 turns
    log = episode(target, [], [1, 3, 5, 7])
    assert log.user_turns == 3 and not any("deliver" in key for key in log.hook_state)
    verdict = precheck(target, log)
    assert verdict.valid and verdict.turns_delivered == 4
    log.user_turns = 2  # a user turn the loop refused (max_user_turns) was never delivered
    assert precheck(target, log).error_type == "astra:episode_truncated"


def test_the_sandbox_must_expose_bfcl():
    check_sandbox_config(SandboxConfig(packages=["bfcl_eval", "mpmath"]))
    with pytest.raises(ValueError, match="mpmath"):
        check_sandbox_config(SandboxConfig(packages=["bfcl_eval"]))


def test_a_sandbox_without_bfcl_raises_instead_of_scoring(bfcl_sample):
    target = bfcl_sample.data.targets[bfcl_sample.index["multi_turn_base_1"]]
    log = episode(target, [rec(1, "ls", {"a": True})], [1, 3, 5, 7])

    async def main():
        async with SandboxPool(SandboxConfig(workers=1)) as pool:
            return await score_episode(pool, target, log)

    with pytest.raises(BfclScoringError, match="astra.sandbox.packages"):
        asyncio.run(main())


def test_model_calls_are_re_executed_only_inside_the_sandbox(bfcl_sample, bfcl_sandbox_config, tmp_path):
    """A call name is model output and BFCL's executor evals it: here it tries to write a host file."""
    from astra_verl.eval.bfcl_replay import turn_calls

    index = bfcl_sample.index["multi_turn_base_1"]
    entry, target = bfcl_sample.data.entries[index], bfcl_sample.data.targets[index]
    marker = tmp_path / f"pwned-{uuid.uuid4().hex}"
    hostile = f"open({str(marker)!r}, 'w').write('x') or ls"
    calls, starts, turn = [], [], 1
    for t, gt in enumerate(turn_calls(entry)):
        starts.append(turn)
        calls += [rec(turn, name, args, index=i) for i, (name, args) in enumerate(gt)]
        if t == 0:
            calls.append(rec(turn, hostile, {"a": True}, CallStatus.UNKNOWN_TOOL, index=len(gt)))
        turn += 2

    async def main():
        async with SandboxPool(bfcl_sandbox_config) as pool:
            return await score_episode(pool, target, episode(target, calls, starts))

    verdict = asyncio.run(main())
    assert not marker.exists() and not os.path.exists(str(marker))
    # the hostile call ran BFCL's eval inside the session, which refused the write; the ls it
    # appended changed nothing, so BFCL accepts the episode as its ground truth's
    assert verdict.valid, verdict


def test_a_call_that_kills_the_checker_fails_the_episode_not_the_scorer(bfcl_sample, bfcl_sandbox_config):
    target = bfcl_sample.data.targets[bfcl_sample.index["multi_turn_base_1"]]
    calls = [rec(1, "__import__('os')._exit(3) or ls", {"a": True}, CallStatus.UNKNOWN_TOOL)]

    async def main():
        async with SandboxPool(bfcl_sandbox_config) as pool:
            return await score_episode(pool, target, episode(target, calls, [1, 3, 5, 7]))

    verdict = asyncio.run(main())
    assert not verdict.valid and verdict.error_type == "astra:checker_crash", verdict
    assert verdict.extra_info()["bfcl_checker_error"] == 1.0
