"""The `tau_user` hook (scripted and LLM user) and τ-bench's reward as pure functions."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
from taukit import require_tau_bench

from astra_foundation.llm.fake_server import FakeOpenAIServer, chat_reply
from astra_verl.benchmarks.tau_hook import OPENING, STOP, TauUserHook, user_system_prompt
from astra_verl.calls.call_log import CallRecord
from astra_verl.reward.tau import action_f1, episode_actions, mixed_reward, outputs_found, tau_score
from astra_verl.rollout.hooks import HookError
from env_registry.call_gate import CallStatus

TERMINATE = json.dumps(["transfer_to_human_agents"])


def _record(tool: str, args: dict, status=CallStatus.OK) -> CallRecord:
    return CallRecord(turn=1, index=0, tool=tool, arguments=args, status=status)


def test_scripted_user_opens_answers_and_stops():
    async def main():
        hook = TauUserHook(
            {"user": "scripted", "script": json.dumps(["I want a refund.", "Yes."]), "terminate_tools": TERMINATE}
        )
        view = SimpleNamespace()
        assert (await hook.on_start(view)).user_message == "I want a refund."
        assert (await hook.on_assistant_end(view, "Which order?")).user_message == "Yes."
        end = await hook.on_assistant_end(view, "Done: 12.50")
        assert end.terminate and end.user_message is None
        return await hook.on_end(view)

    state = asyncio.run(main())
    # the opening message is the prompt's turn: one user turn after it, of the one the script lists
    assert state == {
        "responses": ["Which order?", "Done: 12.50"],
        "user_turns_listed": 1,
        "ended_by": "user_stop",
    }


def test_a_terminate_tool_ends_the_episode_and_other_calls_do_not():
    async def main():
        hook = TauUserHook({"user": "scripted", "script": '["hi"]', "terminate_tools": TERMINATE})
        assert await hook.on_tool_round_end(None, [_record("get_user_details", {"user_id": "u"})]) is None
        unshown = _record("transfer_to_human_agents", {}, CallStatus.UNKNOWN_TOOL)
        skipped = _record("transfer_to_human_agents", {"summary": "s"}, CallStatus.SKIPPED)
        assert await hook.on_tool_round_end(None, [unshown, skipped]) is None  # neither was stepped
        action = await hook.on_tool_round_end(None, [_record("transfer_to_human_agents", {"summary": "s"})])
        return action, await hook.on_end(None)

    action, state = asyncio.run(main())
    assert action.terminate and state["ended_by"] == "terminate_tool"


def test_a_transfer_that_fails_its_arguments_ends_the_episode_as_in_tau_bench():
    """τ-bench's Env.step sets `done` on a terminate tool whatever it returned: a transfer without
    its `summary`, then a write, ends at the transfer there (the write never happens), so here."""
    failed = _record("transfer_to_human_agents", {}, CallStatus.SCHEMA_ERROR)
    write = _record("cancel_pending_order", {"order_id": "#1", "reason": "no longer needed"})

    async def main():
        hook = TauUserHook({"user": "scripted", "script": '["hi"]', "terminate_tools": TERMINATE})
        return await hook.on_tool_round_end(None, [failed]), await hook.on_end(None)

    action, state = asyncio.run(main())
    assert action is not None and action.terminate and state["ended_by"] == "terminate_tool"
    # the same round's later write is not one of the episode's actions either
    assert episode_actions([_record("get", {"id": "1"}), failed, write], ["transfer_to_human_agents"]) == [
        ("get", {"id": "1"})
    ]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"user": "robot"}, "must be 'scripted' or 'llm'"),
        ({"user": "scripted", "script": "[]"}, "at least one message"),
        ({"user": "scripted", "script": "{not json"}, "script is not JSON"),
        (
            {"user": "scripted", "script": '[{"content": "hi", "add_tools": [{"env_id": "e", "name": "x"}]}]'},
            "adds no tools",
        ),
        ({"user": "llm", "instruction": "x"}, r"needs interaction_kwargs \['base_url', 'model'\]"),
    ],
)
def test_bad_configuration_is_refused(kwargs, match):
    with pytest.raises(HookError, match=match):
        TauUserHook(kwargs)


def test_llm_user_uses_tau_benchs_prompt_with_roles_swapped():
    require_tau_bench()
    instruction = "You are Ann, zip 12345. Return the lamp."
    seen = []

    def handler(payload, n):
        seen.append(payload["messages"])
        return chat_reply(["Hi, I'd like to return a lamp.", f"Thanks! {STOP}"][n])

    async def main():
        server = FakeOpenAIServer(handler, models=("user-model",))
        base_url = await server.start()
        try:
            hook = TauUserHook({"user": "llm", "instruction": instruction, "base_url": base_url, "model": "user-model"})
            first = await hook.on_start(None)
            last = await hook.on_assistant_end(None, "Done, refund of 12.50.")
            return first, last, await hook.on_end(None)
        finally:
            await server.stop()

    first, last, state = asyncio.run(main())
    assert first.user_message == "Hi, I'd like to return a lamp." and last.terminate
    system, opening = seen[0]
    assert system == {"role": "system", "content": user_system_prompt(instruction)}
    assert "Instruction: " + instruction in system["content"] and "###STOP###" in system["content"]
    assert opening == {"role": "user", "content": OPENING}
    # The agent speaks as "user" to the user model; the user model's own lines are "assistant".
    assert seen[1][2:] == [
        {"role": "assistant", "content": "Hi, I'd like to return a lamp."},
        {"role": "user", "content": "Done, refund of 12.50."},
    ]
    # an LLM user is open-ended: no listed count; it stopped right after its opening message
    assert state == {
        "responses": ["Done, refund of 12.50."],
        "ended_by": "user_stop",
    }


def test_tau_score_is_the_database_check_times_the_output_check():
    assert tau_score("a", "a", [], []).reward == 1.0
    assert tau_score("a", "b", [], ["anything"]).reward == 0.0
    told = tau_score("a", "a", ["1,234.5", "Lamp"], ["Refund: 1234.5 for your lamp"])
    assert told.outputs == {"1,234.5": False, "Lamp": True} and told.reward == 0.0  # commas go from the message only
    said = tau_score("a", "a", ["1234.5"], ["Refund: 1,234.5"])
    assert (said.reward, said.r_actions, said.r_outputs) == (1.0, 1.0, 1.0)
    assert outputs_found(["x"], []) == {"x": False}


def test_action_f1_and_the_mix():
    gold = [("cancel", {"id": "1"}), ("get", {"id": "1"})]
    assert action_f1(gold, gold)[2] == pytest.approx(1.0, abs=1e-6)
    p, r, _ = action_f1([("get", {"id": "1"}), ("get", {"id": "1"}), ("cancel", {"id": "2"})], gold)
    assert r == 0.5 and p == pytest.approx(1 / 3, abs=1e-6)  # a repeated call solves one action once
    assert action_f1([], []) == (1.0, 1.0, 1.0) and action_f1([("get", {})], [])[2] == 0.0
    score = tau_score("a", "a", [], [])
    assert mixed_reward(score, 0.5, 0.0) == 1.0 and mixed_reward(score, 0.5, 0.5) == 0.75
    with pytest.raises(ValueError, match="within"):
        mixed_reward(score, 0.5, 1.5)


def test_episode_actions_keep_ran_calls_up_to_the_first_terminate_tool():
    calls = [
        _record("get", {"id": "1"}),
        _record("cancel", {"id": "x"}, CallStatus.SCHEMA_ERROR),
        _record("transfer_to_human_agents", {"summary": "s"}),
        _record("cancel", {"id": "1"}),
    ]
    assert episode_actions(calls, ["transfer_to_human_agents"]) == [
        ("get", {"id": "1"}),
        ("transfer_to_human_agents", {"summary": "s"}),
    ]


def test_the_rows_user_budget_and_timeout_reach_the_user_models_requests():
    """`eval tau --user-max-tokens N --timeout S` (and tau-export's): written into each row, read by the
    hook; without them the client's defaults (4096 tokens, 120 s)."""
    require_tau_bench()
    from env_registry.families import tau, tau_rows

    task = tau.load_tasks("retail", "test")[0]
    seen = []

    def handler(payload, n):
        seen.append(payload)
        return chat_reply(f"Bye {STOP}")

    async def ask(user: tau_rows.UserConfig):
        server = FakeOpenAIServer(handler, models=("user-model",))
        base_url = await server.start()
        try:
            kwargs = tau_rows.interaction_kwargs(task, user.model_copy(update={"base_url": base_url}))
            assert all(isinstance(v, str) for v in kwargs.values())  # parquet-friendly
            hook = TauUserHook(kwargs)
            await hook.on_start(None)
            return hook.user.client.backend.timeout_s
        finally:
            await server.stop()

    llm = {"user": "llm", "base_url": "http://unused", "model": "user-model"}
    assert asyncio.run(ask(tau_rows.UserConfig(**llm, max_tokens=256, timeout_s=300))) == 300
    assert seen[-1]["max_tokens"] == 256
    assert asyncio.run(ask(tau_rows.UserConfig(**llm))) == 120
    assert seen[-1]["max_tokens"] == 4096


@pytest.mark.parametrize(("key", "value"), [("max_tokens", "0"), ("max_tokens", "many"), ("timeout_s", "-1")])
def test_a_bad_user_budget_in_a_row_is_refused(key, value):
    kwargs = {"user": "llm", "instruction": "x", "base_url": "http://127.0.0.1:9/v1", "model": "m", key: value}
    with pytest.raises(HookError, match=f"interaction_kwargs.{key} must be a positive"):
        TauUserHook(kwargs)
