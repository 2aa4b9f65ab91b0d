"""The bfcl_multi_turn hook: turns one at a time, hold-out turns, BFCL's step limit."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from astra_verl.benchmarks.bfcl_hook import BfclMultiTurnHook, parse_turns
from astra_verl.calls.call_log import CallRecord, EpisodeLog
from astra_verl.rollout.call_parsing import BFCL_SKIPPED
from astra_verl.rollout.episode_hook import create_hook
from astra_verl.rollout.hooks import HookError
from env_registry.call_gate import CallStatus
from env_registry.rows import ToolRef

TURNS = [
    {"content": "second", "add_tools": []},
    {"content": None, "add_tools": ["sort"]},
    {"content": "fourth", "add_tools": []},
]
SORT = {"type": "function", "function": {"name": "sort", "description": "Sort a file.", "parameters": {}}}


def view(log: EpisodeLog):
    return SimpleNamespace(log=log, tool_schemas=lambda refs: [SORT for _ in refs])


def hook(**extra) -> BfclMultiTurnHook:
    kwargs = {
        "name": "bfcl_multi_turn",
        "env_id": "e1",
        "bfcl_id": "multi_turn_miss_func_0",
        "turns": json.dumps(TURNS),
    }
    return create_hook({**kwargs, **extra}, default="astra_default", interaction_config_path=None)


def run(coro):
    return asyncio.run(coro)


def test_turns_are_delivered_one_at_a_time_and_the_holdout_reveals_its_tools():
    h, log = hook(), EpisodeLog(env_id="e1")
    assert isinstance(h, BfclMultiTurnHook) and h.tool_pool() == [ToolRef("e1", "sort")]
    log.assistant_turns = 2
    first = run(h.on_assistant_end(view(log), "done"))
    assert first.user_message == "second" and first.add_tools == ()
    log.assistant_turns = 3
    holdout = run(h.on_assistant_end(view(log), "I cannot sort"))
    assert holdout.add_tools == (ToolRef("e1", "sort"),)
    # BFCL's prompting-mode message: the new functions, then its sentence
    assert holdout.user_message.startswith('[{"name": "sort"')
    assert holdout.user_message.endswith("I have updated some more functions you can choose from. What about now?")
    log.assistant_turns = 5
    assert run(h.on_assistant_end(view(log), "sorted")).user_message == "fourth"
    log.assistant_turns = 6
    assert run(h.on_assistant_end(view(log), "all done")) is None  # after the last turn the episode ends
    state = run(h.on_end(view(log)))
    # turns after the prompt's (astra_verl.rollout.hooks.UserTurn); the prompt's turn starts turn_starts
    assert state["user_turns_listed"] == 3  # delivered: the episode's log.user_turns, not the hook's
    assert state["turn_starts"] == [1, 3, 4, 6] and state["force_quit"] is False


def test_fc_mode_sends_only_bfcls_sentence():
    h, log = hook(list_added_tools=False), EpisodeLog(env_id="e1")
    run(h.on_assistant_end(view(log), ""))
    action = run(h.on_assistant_end(view(log), ""))
    assert action.user_message == "I have updated some more functions you can choose from. What about now?"


def step(h, log, turn: int, *statuses: CallStatus):
    """One assistant turn with calls of these statuses (default: one good call), as the loop reports it."""
    log.assistant_turns = turn
    records = [
        CallRecord(
            turn=turn,
            index=i,
            tool="ls",
            arguments={} if s is not CallStatus.BAD_JSON else "{",
            status=s,
            error_kind=BFCL_SKIPPED if s is CallStatus.BAD_JSON else None,  # astra_bfcl_qwen's kind for "{"
        )
        for i, s in enumerate(statuses or (CallStatus.OK,))
    ]
    for r in records:
        assert run(h.on_tool_result(view(log), r)) is None
    return run(h.on_tool_round_end(view(log), records))


def test_step_limit_ends_the_episode_after_bfcls_21st_step():
    h, log = hook(), EpisodeLog(env_id="e1")
    for turn in range(1, 21):
        assert step(h, log, turn, CallStatus.OK, CallStatus.OK) is None
    action = step(h, log, 21, CallStatus.OK, CallStatus.BAD_JSON)  # prompt style: the bad block alone is dropped
    assert action is not None and action.terminate and h.force_quit
    assert run(h.on_assistant_end(view(log), "")) is None
    state = run(h.on_end(view(log)))
    assert state["force_quit"] and state["steps_per_turn"] == [21] and state["turn_starts"] == [1]


def test_steps_are_counted_per_turn():
    h, log = hook(max_steps_per_turn=2), EpisodeLog(env_id="e1")
    for turn in (1, 2):
        assert step(h, log, turn) is None
    log.assistant_turns = 3
    run(h.on_assistant_end(view(log), ""))
    for turn in (4, 5):
        assert step(h, log, turn) is None
    assert step(h, log, 6).terminate
    assert run(h.on_end(view(log)))["steps_per_turn"] == [2, 3]


@pytest.mark.parametrize("style", ["prompt", "fc"])
def test_a_step_bfcl_cannot_decode_ends_the_user_turn_uncounted(style):
    """BFCL: a step whose decoding raises or yields no call ends the turn ("Proceed to next turn")."""
    h, log = hook(call_style=style), EpisodeLog(env_id="e1")
    assert step(h, log, 1) is None
    # every block malformed (prompt: nothing decoded) / one malformed argument string (fc: decoding raises)
    bad = (CallStatus.BAD_JSON,) if style == "prompt" else (CallStatus.OK, CallStatus.BAD_JSON)
    action = step(h, log, 2, *bad)
    assert action.user_message == "second" and not action.terminate
    for turn in (3, 4):  # the hold-out turn, then "fourth"
        assert step(h, log, turn, *bad).user_message
    last = step(h, log, 5, *bad)  # after the last user turn, BFCL's loop ends
    assert last.terminate and last.user_message is None
    state = run(h.on_end(view(log)))
    assert state["turn_starts"] == [1, 3, 4, 5] and state["steps_per_turn"] == [1, 0, 0, 0]
    assert state["call_style"] == style and len(state["turn_starts"]) - 1 == 3


def test_prompt_style_keeps_a_step_with_one_good_block():
    h, log = hook(), EpisodeLog(env_id="e1")
    assert step(h, log, 1, CallStatus.BAD_JSON, CallStatus.OK) is None
    assert h.steps == [1] and h.current == 0


def test_prompt_style_needs_bfcls_decoder_as_the_tool_parser():
    """A prompt-style episode read by another parser (the lenient hermes one) would not decode each
    step as BFCL does: the episode refuses to start rather than be scored differently."""
    with pytest.raises(HookError, match="astra.rollout.tool_parser=astra_bfcl_qwen"):
        run(hook().on_start(view(EpisodeLog(env_id="e1", parser="astra_hermes"))))
    assert run(hook().on_start(view(EpisodeLog(env_id="e1", parser="astra_bfcl_qwen")))) is None
    assert run(hook(call_style="fc").on_start(view(EpisodeLog(env_id="e1")))) is None  # OpenAI tool calls


def test_an_unknown_call_style_is_an_error():
    with pytest.raises(HookError, match="call_style is 'xml'"):
        hook(call_style="xml")


@pytest.mark.parametrize(
    "turns, match",
    [
        ("not json", "not JSON"),
        ('{"content": "x"}', "must be a list"),
        ('[{"content": null, "add_tools": []}]', "either content"),
        ('[{"content": "x", "add_tools": ["sort"]}]', "either content"),
        ('[{"content": 3}]', "string or null"),
    ],
)
def test_bad_turns_are_clear_errors(turns, match):
    with pytest.raises(HookError, match=match):
        parse_turns(turns, "e1")


def test_missing_env_id_is_an_error():
    with pytest.raises(HookError, match="env_id"):
        create_hook({"name": "bfcl_multi_turn", "turns": "[]"}, default="astra_default", interaction_config_path=None)
