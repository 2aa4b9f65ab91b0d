"""`astra_tool_agent` driven in-process by a scripted server, tools running in the real sandbox."""

from __future__ import annotations

import asyncio
import json

import pytest

from astra_verl.calls.call_log import EpisodeLog, Termination
from astra_verl.reward.f1 import score_episode
from astra_verl.rollout.context import RolloutContext
from astra_verl.rollout.testing import ScriptedServer, make_loop, run
from astra_verl.rollout.toolset import ToolsetError
from env_registry.call_gate import CallStatus
from env_registry.rows import RowError, ToolRef


def mask_runs(out) -> list[list[int]]:
    """The response's maximal runs of mask-1 tokens."""
    runs, cur = [], None
    for tok, m in zip(out.response_ids, out.response_mask, strict=True):
        if m:
            cur = cur if cur is not None else []
            cur.append(tok)
        elif cur is not None:
            runs.append(cur)
            cur = None
    if cur is not None:
        runs.append(cur)
    return runs


def assert_mask_exact(out, server: ScriptedServer):
    """Mask 1 exactly on the generated tokens: its runs are the server's turns, in order."""
    (turns,) = server.emitted.values()
    assert len(out.response_ids) == len(out.response_mask)
    assert out.response_mask[0] == 1
    assert mask_runs(out) == turns


def episode(cfg, tokenizer, script, row, **server_kw):
    server = ScriptedServer(tokenizer, script, **server_kw)
    loop = make_loop(cfg, server, tokenizer)
    out = run(loop.run({"temperature": 1.0}, **row))
    return out, EpisodeLog.from_extra_fields(out.extra_fields), server


@pytest.fixture(scope="module")
def cfg(trainer_config):
    return trainer_config()


def test_full_episode_log_and_mask(cfg, tiny_tokenizer, envs, kit):
    script = [
        kit.call_text("get_population", {"city": "Paris"})
        + kit.call_text("get_area", {"city": "Paris", "unit": "acres"})
        + kit.call_text("get_altitude", {"city": "Paris"}),
        "Now the area.\n" + kit.call_text("get_area", {"city": "Paris"}),
        "The density is about 20503 people per km2.",
    ]
    out, log, server = episode(cfg, tiny_tokenizer, script, kit.row_kwargs(envs.city, envs.store), with_logprobs=True)
    assert_mask_exact(out, server)
    assert [(c.turn, c.index, c.tool, c.status, c.error_kind) for c in log.calls] == [
        (1, 0, "get_population", CallStatus.OK, None),
        (1, 1, "get_area", CallStatus.SCHEMA_ERROR, "enum"),
        (1, 2, "get_altitude", CallStatus.UNKNOWN_TOOL, None),
        (2, 0, "get_area", CallStatus.OK, None),
    ]
    assert [c.solved for c in log.calls] == [["q1"], [], [], ["q2"]]
    assert (log.assistant_turns, log.terminated_by, log.hook) == (3, Termination.NO_TOOL_CALL, "astra_default")
    assert log.final_answer == "The density is about 20503 people per km2."
    assert (log.num_calls, log.num_invalid_calls, log.num_tool_errors) == (4, 2, 0)
    pop = log.calls[0]
    assert json.loads(pop.output) == {"city": "paris", "population": 2161000}
    assert pop.source_env == envs.city.id and not pop.distractor and pop.elapsed_s > 0
    # every observation is in the mask-0 part, once per call
    context = tiny_tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask, strict=True) if not m])
    for c in log.calls:
        assert c.output in context
    assert "is not one of ['km2', 'mi2']" in log.calls[1].output
    assert "Available tools: get_population, get_area" in log.calls[2].output
    # logprobs follow the mask: the server's value on generated tokens, 0 on context tokens
    lp = out.response_logprobs
    assert all((p == -0.5) if m else (p == 0.0) for p, m in zip(lp, out.response_mask, strict=True))
    assert out.num_turns == 1 + 3 + 2
    assert out.extra_fields["turn_scores"] == []


def test_fresh_tool_state_per_rollout(cfg, tiny_tokenizer, envs, kit):
    """The G rollouts of one row never share tool state, in sequence or concurrently."""
    row = kit.row_kwargs(envs.counter, envs.store)
    script = [kit.call_text("bump_counter", {}), kit.call_text("bump_counter", {"step": 1}), "It is 2."]

    def counts(log):
        return [json.loads(c.output)["count"] for c in log.calls]

    for _ in range(2):
        _, log, _ = episode(cfg, tiny_tokenizer, script, row)
        assert counts(log) == [1, 2]
        assert [c.solved for c in log.calls] == [["c1"], ["c2"]]

    server = ScriptedServer(tiny_tokenizer, script)

    async def group(n):
        loops = [make_loop(cfg, server, tiny_tokenizer) for _ in range(n)]
        return await asyncio.gather(*(lp.run({}, **row) for lp in loops))

    outs = run(group(4))
    assert [counts(EpisodeLog.from_extra_fields(o.extra_fields)) for o in outs] == [[1, 2]] * 4


def test_tool_failures_are_observations(cfg, tiny_tokenizer, envs, kit):
    script = [
        kit.call_text("always_fails", {"x": "a"}) + kit.call_text("spin_forever", {"x": "b"}),
        kit.call_text("bump_counter", {"step": 0}) + kit.call_text("bump_counter", {"nope": 1}),
        kit.call_text("bump_counter", {}),
        "Done.",
    ]
    out, log, server = episode(cfg, tiny_tokenizer, script, kit.row_kwargs(envs.counter, envs.store))
    assert_mask_exact(out, server)
    assert [(c.status, c.error_kind) for c in log.calls] == [
        (CallStatus.TOOL_ERROR, "exception"),
        (CallStatus.TOOL_ERROR, "timeout"),
        (CallStatus.SCHEMA_ERROR, "minimum"),
        (CallStatus.SCHEMA_ERROR, "additionalProperties"),
        (CallStatus.OK, None),
    ]
    assert "backend unavailable" in log.calls[0].output
    assert log.calls[1].output.startswith("Error (timeout)")
    assert json.loads(log.calls[4].output) == {"count": 1}
    assert log.terminated_by is Termination.NO_TOOL_CALL


def test_max_assistant_turns(trainer_config, tiny_tokenizer, envs, kit):
    cfg = trainer_config("actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3")
    out, log, server = episode(
        cfg, tiny_tokenizer, [kit.call_text("bump_counter", {})], kit.row_kwargs(envs.counter, envs.store)
    )
    assert_mask_exact(out, server)
    assert (log.assistant_turns, log.terminated_by) == (3, Termination.MAX_TURNS)
    assert len(log.calls) == 2  # the third turn's call is never executed
    assert log.final_answer == ""


def test_max_response_length(trainer_config, tiny_tokenizer, envs, kit):
    cfg = trainer_config("actor_rollout_ref.rollout.response_length=120")
    script = [kit.call_text("get_population", {"city": "Paris"})] * 10
    out, log, _ = episode(cfg, tiny_tokenizer, script, kit.row_kwargs(envs.city, envs.store))
    assert log.terminated_by is Termination.MAX_LENGTH
    assert len(out.response_ids) == len(out.response_mask) <= 120


def test_parallel_call_cap_skips_and_does_not_charge(trainer_config, tiny_tokenizer, envs, kit):
    cfg = trainer_config("actor_rollout_ref.rollout.multi_turn.max_parallel_calls=2")
    script = ["".join(kit.call_text("bump_counter", {}) for _ in range(5)), "ok"]
    out, log, server = episode(cfg, tiny_tokenizer, script, kit.row_kwargs(envs.counter, envs.store))
    assert_mask_exact(out, server)
    assert [c.status for c in log.calls] == [CallStatus.OK] * 2 + [CallStatus.SKIPPED] * 3
    assert log.num_calls == 2
    assert "at most 2 tool calls" in log.calls[2].output


def test_stop_when_all_solved_without_leaves_still_lets_the_model_answer(trainer_config, tiny_tokenizer, envs, kit):
    """The root counts only when the final answer commits to it: after the tool round that
    solves everything the model gets its answer turn, and calls written in it are not run."""
    cfg = trainer_config("+astra.rollout.stop_when_all_solved=true")
    both = kit.call_text("bump_counter", {}) + kit.call_text("bump_counter", {})
    script = [both, kit.call_text("bump_counter", {}), "never generated"]
    _, log, server = episode(cfg, tiny_tokenizer, script, kit.row_kwargs(envs.counter, envs.store))
    assert (log.terminated_by, log.assistant_turns, server.calls, len(log.calls)) == (Termination.ALL_SOLVED, 2, 2, 2)


def test_stop_when_all_solved_lets_the_model_answer_a_pending_leaf(trainer_config, tiny_tokenizer, envs, kit):
    """city_env's q3 needs no tool: the model gets its answer turn, so recall can reach 1."""
    cfg = trainer_config("+astra.rollout.stop_when_all_solved=true")
    calls = kit.call_text("get_population", {"city": "Paris"}) + kit.call_text("get_area", {"city": "Paris"})
    row = kit.row_kwargs(envs.city, envs.store)
    _, log, _ = episode(
        cfg, tiny_tokenizer, [calls, "The density is 20503 people per km2. <answer>20503</answer>"], row
    )
    assert (log.terminated_by, log.assistant_turns) == (Termination.NO_TOOL_CALL, 2)
    assert score_episode(log, envs.city.reward_target()).recall == 1.0
    # the answer turn is for the answer: calls written in it end the episode unexecuted
    _, log, _ = episode(cfg, tiny_tokenizer, [calls, kit.call_text("get_area", {"city": "Lyon"})], row)
    assert (log.terminated_by, log.assistant_turns, len(log.calls)) == (Termination.ALL_SOLVED, 2, 2)


def test_the_early_stop_waits_for_the_roots_answer_in_the_channel_as_the_reward_does(envs):
    """counter_env's root (c2) needs a tool. A final answer that states it only in prose (a turn
    before a user turn and more calls) must not end the episode `all_solved`: the reward reads the
    channel only, so the model still gets its answer turn."""
    from types import SimpleNamespace

    from astra_verl.rollout.agent_loop import LoopTransport

    target = envs.counter.reward_target()

    def pending(final_answer: str) -> bool:
        fake = SimpleNamespace(ep=SimpleNamespace(target=target, log=SimpleNamespace(final_answer=final_answer)))
        return LoopTransport._leaves_pending(fake)

    assert pending("") and pending("The counter is 2.")
    assert not pending("The counter is now <answer>2</answer>")


def test_calls_whose_observations_overflow_the_budget_are_unseen(trainer_config, tiny_tokenizer, envs, kit):
    """The turn's tool messages are dropped when they overflow the response budget: the model
    never saw those outputs, so nothing they contain counts as solved."""
    calls = "".join(kit.call_text(t, {"city": "Paris"}) for t in ("get_population", "get_area", "get_area"))
    generated = len(tiny_tokenizer.encode(calls, add_special_tokens=False)) + 1
    cfg = trainer_config(f"actor_rollout_ref.rollout.response_length={generated + 16}")
    out, log, _ = episode(cfg, tiny_tokenizer, [calls, "unreached"], kit.row_kwargs(envs.city, envs.store))
    assert (log.terminated_by, log.assistant_turns) == (Termination.MAX_LENGTH, 1)
    assert [(c.status, c.seen, c.solved) for c in log.calls] == [(CallStatus.OK, False, [])] * 3
    assert "2161000" in log.calls[0].output  # the answer was in the output, but never in the context
    assert "2161000" not in tiny_tokenizer.decode(out.response_ids)
    result = score_episode(log, envs.city.reward_target())
    assert (result.solved, result.calls, result.reward) == (0, 3, 0.0)


def test_seen_calls_still_solve(trainer_config, tiny_tokenizer, envs, kit):
    """The same turn with room for its observations solves q1 and q2 (the budget is the only difference)."""
    calls = "".join(kit.call_text(t, {"city": "Paris"}) for t in ("get_population", "get_area", "get_area"))
    _, log, _ = episode(trainer_config(), tiny_tokenizer, [calls, "ok"], kit.row_kwargs(envs.city, envs.store))
    assert [(c.seen, c.solved) for c in log.calls] == [(True, ["q1"]), (True, ["q2"]), (True, [])]
    assert score_episode(log, envs.city.reward_target()).solved == 2


class RecordingServer(ScriptedServer):
    """Records each generate call's request id and priority."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[str, object]] = []

    async def generate(self, request_id, **kw):
        self.requests.append((request_id, kw.get("priority")))
        return await super().generate(request_id, **kw)


@pytest.mark.parametrize("determinism", [False, True])
def test_request_ids_and_priority_follow_verls_loops(trainer_config, tiny_tokenizer, envs, kit, determinism):
    """As verl's tool loop: `det-{priority}` ids under rollout.full_determinism, else a fresh uuid4
    hex per episode; every turn of an episode uses one id, and the priority reaches the server."""
    import numpy as np

    cfg = trainer_config(f"actor_rollout_ref.rollout.full_determinism={str(determinism).lower()}")
    server = RecordingServer(tiny_tokenizer, [kit.call_text("bump_counter", {}), "done"])
    row = kit.row_kwargs(envs.counter, envs.store)
    for priority in (np.int64(7), np.int64(8)):  # verl's non_tensor_batch hands numpy ints
        run(make_loop(cfg, server, tiny_tokenizer).run({}, priority=priority, **row))
    ids = [r for r, _ in server.requests]
    assert [p for _, p in server.requests] == [7, 7, 8, 8]
    assert all(type(p) is int for _, p in server.requests)
    assert ids[0] == ids[1] and ids[2] == ids[3] and ids[0] != ids[2]
    if determinism:
        assert ids[::2] == ["det-7", "det-8"]
    else:
        assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)


def test_json_tool_messages(trainer_config, tiny_tokenizer, envs, kit):
    cfg = trainer_config("+astra.rollout.tool_message_format=json")
    script = [kit.call_text("get_area", {"city": "Paris"}) + kit.call_text("get_area", {"city": 3}), "ok"]
    out, log, _ = episode(cfg, tiny_tokenizer, script, kit.row_kwargs(envs.city, envs.store))
    text = tiny_tokenizer.decode(out.response_ids)
    ok = json.loads(text.split("<tool_response>\n")[1].split("\n</tool_response>")[0])
    assert ok == {"tool": "get_area", "status": "ok", "output": log.calls[0].output}
    assert '"status": "error"' in text and log.calls[1].status is CallStatus.SCHEMA_ERROR


def test_distractors_run_their_own_code(cfg, tiny_tokenizer, envs, kit):
    tools = [
        ToolRef(envs.city.id, "get_population"),
        ToolRef(envs.weather.id, "get_forecast", distractor=True),
        ToolRef(envs.city.id, "get_area"),
    ]
    row = kit.row_kwargs(envs.city, envs.store, tools=tools)
    script = [kit.call_text("get_forecast", {"city": "Paris"}), "fine"]
    out, log, _ = episode(cfg, tiny_tokenizer, script, row)
    (call,) = log.calls
    assert (call.status, call.distractor, call.source_env) == (CallStatus.OK, True, envs.weather.id)
    assert json.loads(call.output) == {"city": "Paris", "forecast": "rain"}
    assert log.num_distractor_calls == 1 and call.solved == []
    prompt = tiny_tokenizer.decode(out.prompt_ids)
    assert prompt.index('"get_population"') < prompt.index('"get_forecast"') < prompt.index('"get_area"')


def test_data_errors_fail_clearly(cfg, tiny_tokenizer, envs, kit):
    loop = make_loop(cfg, ScriptedServer(tiny_tokenizer, ["x"]), tiny_tokenizer)
    clash = [ToolRef(envs.city.id, "get_area"), ToolRef(envs.weather.id, "get_area", distractor=True)]
    with pytest.raises(ToolsetError, match="several tools named \\['get_area'\\]"):
        run(loop.run({}, **kit.row_kwargs(envs.city, envs.store, tools=clash)))
    missing = [ToolRef(envs.city.id, "get_everything")]
    with pytest.raises(ToolsetError, match="has no tool 'get_everything'"):
        run(loop.run({}, **kit.row_kwargs(envs.city, envs.store, tools=missing)))
    mislabeled = [ToolRef(envs.weather.id, "get_forecast")]
    with pytest.raises(ToolsetError, match="distractors, and only they"):
        run(loop.run({}, **kit.row_kwargs(envs.city, envs.store, tools=mislabeled)))
    row = kit.row_kwargs(envs.city, envs.store)
    row["extra_info"] = {"index": 0}
    with pytest.raises(RowError, match="no extra_info.astra"):
        run(loop.run({}, **row))


def test_scripted_user_turns_and_tools_added_mid_episode(cfg, tiny_tokenizer, envs, kit):
    hidden = {"env_id": envs.city.id, "name": "get_area"}
    interaction = {
        "name": "scripted_user_turns",
        "turns": [{"content": "Now give me the area too; you have a new tool.", "add_tools": [hidden]}],
    }
    row = kit.row_kwargs(
        envs.city, envs.store, tools=[ToolRef(envs.city.id, "get_population")], interaction=interaction
    )
    script = [
        kit.call_text("get_area", {"city": "Paris"}),  # not shown yet: unknown
        "2161000 people.",
        kit.call_text("get_area", {"city": "Paris"}),  # revealed by the user turn
        "105.4 km2.",
    ]
    out, log, server = episode(cfg, tiny_tokenizer, script, row)
    assert_mask_exact(out, server)
    assert [c.status for c in log.calls] == [CallStatus.UNKNOWN_TOOL, CallStatus.OK]
    assert (log.user_turns, log.assistant_turns, log.final_answer) == (1, 4, "105.4 km2.")
    assert log.hook == "scripted_user_turns"
    assert log.hook_state == {"user_turns_listed": 1} and log.user_turns == 1
    context = tiny_tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask, strict=True) if not m])
    assert "Now give me the area too" in context
    assert '"get_area"' not in tiny_tokenizer.decode(out.prompt_ids)  # hidden at the start


def test_verl_interaction_through_the_loop(trainer_config, tiny_tokenizer, envs, kit, tmp_path, monkeypatch):
    pkg = tmp_path / "loop_interactions"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "feedback.py").write_text(
        "from astra_verl.rollout.verl_interaction import BaseInteraction\n\n\n"
        "class FeedbackInteraction(BaseInteraction):\n"
        "    async def generate_response(self, instance_id, messages, **kwargs):\n"
        "        done = kwargs['secret'] in (messages[-1].get('content') or '')\n"
        "        return done, 'Correct!' if done else 'No, think again.', 1.0 if done else 0.0, {}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yaml = tmp_path / "interactions.yaml"
    yaml.write_text("interaction:\n  - class_name: loop_interactions.feedback.FeedbackInteraction\n")
    cfg = trainer_config(f"+astra.rollout.interaction_config_path={yaml}")
    row = kit.row_kwargs(envs.city, envs.store, interaction={"name": "feedback", "secret": "2161000"})
    script = ["Maybe 2 million?", kit.call_text("get_population", {"city": "Paris"}), "Exactly 2161000."]
    out, log, server = episode(cfg, tiny_tokenizer, script, row)
    assert_mask_exact(out, server)
    assert (log.terminated_by, log.user_turns, log.assistant_turns) == (Termination.HOOK, 2, 3)
    assert out.extra_fields["turn_scores"] == [0.0, 1.0]
    assert log.hook_state["interaction"] == "feedback" and log.hook_state["turn_scores"] == [0.0, 1.0]
    # as in verl <= 0.7, the terminating response is still delivered (mask 0) before the end
    tail = tiny_tokenizer.decode(out.response_ids).rsplit("Exactly 2161000.", 1)[1]
    assert "<|im_start|>user\nCorrect!<|im_end|>" in tail


def test_procedural_environment_solved_by_its_golden_calls(cfg, tiny_tokenizer, kit, tmp_path):
    """A generated environment, exported the usual way, is fully solved by replaying its golden calls."""
    from env_registry.families.procedural import generate

    spec = next(s for s in generate(6, seed=3) if sum(q.needs_tool for q in s.sub_questions) >= 2)
    store = kit.write_store(tmp_path / "store", [spec])
    script = []
    for q in spec.sub_questions:
        if q.needs_tool:
            golden = next(g for g in spec.tool(q.tool).golden_calls if g.expected == q.answer)
            script.append(kit.call_text(q.tool, golden.args))
    script.append(f"The answer is {spec.final_answer}.")
    out, log, server = episode(cfg, tiny_tokenizer, script, kit.row_kwargs(spec, store))
    assert_mask_exact(out, server)
    assert all(c.status is CallStatus.OK for c in log.calls)
    solved = {q for c in log.calls for q in c.solved}
    assert solved == {q.id for q in spec.sub_questions if q.needs_tool}


def test_prompt_over_prompt_length_fails_instead_of_cutting_the_tool_list(trainer_config, tiny_tokenizer, envs, kit):
    from astra_verl.rollout.agent_loop import PromptTooLong

    cfg = trainer_config("actor_rollout_ref.rollout.prompt_length=64")
    loop = make_loop(cfg, ScriptedServer(tiny_tokenizer, ["x"]), tiny_tokenizer)
    with pytest.raises(PromptTooLong, match="prompt_length=64; export with --tokenizer --max-prompt-length"):
        run(loop.run({}, **kit.row_kwargs(envs.city, envs.store)))


def test_sandbox_infrastructure_failure_raises(cfg, tiny_tokenizer, envs, kit, monkeypatch):
    """A sandbox that cannot open sessions is not a model error: the episode raises, naming it."""
    import astra_foundation.sandbox as sandbox_pkg

    class Broken:
        async def open_session(self, program):
            raise sandbox_pkg.SandboxError("no sandbox worker could start: test")

    loop = make_loop(
        cfg,
        ScriptedServer(tiny_tokenizer, [kit.call_text("get_area", {"city": "Paris"})]),
        tiny_tokenizer,
        context=RolloutContext(sandbox=Broken()),
    )
    with pytest.raises(sandbox_pkg.SandboxError, match="no sandbox worker could start"):
        run(loop.run({}, **kit.row_kwargs(envs.city, envs.store)))
