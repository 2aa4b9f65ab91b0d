"""One episode driver, three loops: the same scripted episodes give the same transcript and log
through `astra_tool_agent` (token ids in verl), the eval chat rollout (OpenAI messages) and
trajectory synthesis (`data_synth.traj.interact`).

Decoding is each transport's own (hermes text, OpenAI tool calls); here every loop decodes the
same OpenAI-style turns (the agent loop through a test parser that reads a turn's text as that
JSON), so what differs could only be the episode's rules. The episodes cover calls, a malformed
call, an unknown tool, calls past the parallel cap, a user turn given mid-round and one at the
end of a round, the user-turn cap and the assistant-turn cap.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from verl.experimental.agent_loop.tool_parser import ToolParser

from astra_foundation.llm import LLMClient, ScriptedBackend, ToolCall
from astra_foundation.sandbox import SandboxConfig, SandboxPool
from astra_verl.calls.call_log import EpisodeLog
from astra_verl.eval.chat_rollout import ChatRollout
from astra_verl.rollout.call_parsing import ParsedTurn
from astra_verl.rollout.hooks import EnvironmentHook, HookAction, register_hook
from astra_verl.rollout.testing import ScriptedServer, make_loop, run
from astra_verl.rollout.tool_parser import ReportingToolParser
from astra_verl.rollout.toolset import ToolCatalog
from data_synth.traj import interact
from data_synth.traj.records import Observation, Server, Source, ToolDoc
from env_registry.call_gate import CallStatus
from env_registry.episode_driver import EpisodeLimits, ParsedCall
from env_registry.rows import RowInfo, ToolRef

HOOK = "test_transcript_user"
PARSER = "astra_test_openai"


@ToolParser.register(PARSER)
class OpenAIJsonParser(ReportingToolParser):
    """A turn's text is `{"content": str, "tool_calls": [{"name", "arguments": str}]}`: the chat decoding."""

    def parse_calls(self, text: str) -> ParsedTurn:
        turn = json.loads(text)
        calls = [
            ParsedCall.from_openai(ToolCall.from_openai({"function": c}, i))
            for i, c in enumerate(turn.get("tool_calls", []))
        ]
        return ParsedTurn(content=turn["content"].strip(), calls=calls)


@register_hook(HOOK)
class TranscriptHook(EnvironmentHook):
    """Records the transcript at the end; with `users`, says something mid-round (after the first
    executed call of the episode) and once more at the end of the first round without calls."""

    def __init__(self, kwargs: dict[str, Any]):
        super().__init__(kwargs)
        self.users = bool(kwargs.get("users"))
        self.mid_said = self.end_said = False

    async def on_tool_result(self, view, record) -> HookAction | None:
        if self.users and not self.mid_said and record.status is not CallStatus.SKIPPED:
            self.mid_said = True
            return HookAction(user_message="Mid-round: Lyon too, please.")
        return None

    async def on_assistant_end(self, view, content: str) -> HookAction | None:
        if self.users and not self.end_said:
            self.end_said = True
            return HookAction(user_message="And Nice?")
        return None

    async def on_end(self, view) -> dict[str, Any]:
        return {"transcript": [dict(m) for m in view.messages]}


def call(name: str, arguments: Any) -> dict[str, str]:
    return {"name": name, "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}


def turn(content: str, *calls: dict[str, str]) -> dict[str, Any]:
    return {"content": content, "tool_calls": list(calls)}


PARIS = call("get_population", {"city": "Paris"})
EPISODES = {
    "calls, malformed, unknown, past the cap": (
        [
            turn("Looking.", PARIS, call("get_area", "{not json"), call("get_altitude", {"city": "Paris"}), PARIS),
            turn("", call("get_area", {"city": "Paris", "unit": "acres"}), call("get_area", {"city": "Paris"})),
            turn("The density is about 20503 people per km2."),
        ],
        EpisodeLimits(max_assistant_turns=8, max_parallel_calls=3),
        False,
    ),
    "user turns mid-round and at the end of a round": (
        [
            turn("", PARIS, call("get_population", {"city": "Lyon"})),
            turn("Paris 2161000, Lyon 513275."),
            turn("", call("get_population", {"city": "Nice"})),
            turn("Nice has 342669."),
        ],
        EpisodeLimits(max_assistant_turns=8, max_parallel_calls=4),
        True,
    ),
    "the user-turn cap": (
        [turn("", PARIS), turn("Paris has 2161000.")],
        EpisodeLimits(max_assistant_turns=8, max_user_turns=1, max_parallel_calls=4),
        True,
    ),
    "the assistant-turn cap": (
        [turn("", PARIS), turn("", call("get_population", {"city": "Lyon"})), turn("never reached")],
        EpisodeLimits(max_assistant_turns=2, max_parallel_calls=4),
        False,
    ),
}


def responder(script: list[dict[str, Any]]):
    def respond(step: str, payload: dict) -> dict:
        k = sum(1 for m in payload["messages"] if m["role"] == "assistant")
        return script[min(k, len(script) - 1)]

    return respond


def summary(log: Any, calls: list[tuple]) -> dict[str, Any]:
    return {
        "counts": (log.assistant_turns, log.user_turns, log.final_answer, log.terminated_by.value),
        "calls": calls,
        "transcript": log.hook_state["transcript"],
    }


def rl_calls(log: EpisodeLog) -> list[tuple]:
    return [(c.turn, c.call_id, c.tool, c.status.value, c.error_kind) for c in log.calls]


def through_agent_loop(trainer_config, tokenizer, row: dict, script, limits: EpisodeLimits) -> dict:
    cfg = trainer_config(
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={limits.max_assistant_turns}",
        f"actor_rollout_ref.rollout.multi_turn.max_parallel_calls={limits.max_parallel_calls}",
        f"+astra.rollout.max_user_turns={'null' if limits.max_user_turns is None else limits.max_user_turns}",
        f"+astra.rollout.tool_parser={PARSER}",
    )
    server = ScriptedServer(tokenizer, [json.dumps(t) for t in script])
    out = run(make_loop(cfg, server, tokenizer).run({"temperature": 1.0}, **row))
    log = EpisodeLog.from_extra_fields(out.extra_fields)
    return summary(log, rl_calls(log))


async def through_chat(row: dict, script, limits: EpisodeLimits) -> dict:
    client = LLMClient(ScriptedBackend(responder=responder(script)), model="scripted")
    async with SandboxPool(SandboxConfig(workers=1)) as pool:
        result = await ChatRollout(client, pool, limits=limits).run({"prompt": row["raw_prompt"], **row})
    assert result.messages == result.log.hook_state["transcript"]
    return summary(result.log, rl_calls(result.log))


class SandboxTools:
    """Synthesis's tool backend over the environment's own tool code (so observations agree)."""

    name = "sandbox"

    def __init__(self, pool: SandboxPool, toolset: Any):
        self.pool, self.toolset, self.session = pool, toolset, None

    async def call(self, tool: ToolDoc, arguments: dict[str, Any], call_index: int) -> Observation:
        self.session = self.session or await self.pool.open_session(self.toolset.program)
        t = self.toolset.tools[tool.name]
        result = await self.pool.call(self.session, t.module, t.function, arguments)
        assert result.ok, result.text
        return Observation(status=CallStatus.OK, content=result.text)


async def through_synthesis(env, store: str, row: dict, script, limits: EpisodeLimits, users: bool) -> dict:
    toolset = ToolCatalog().toolset(
        RowInfo(env_id=env.id, store=store, tools=[ToolRef(env.id, t.name) for t in env.tools])
    )
    server = Server(
        key="env",
        server_id="env",
        title="env",
        name="env",
        tools=[ToolDoc(name=t.name, description=t.description, parameters=t.parameters) for t in env.tools],
        source=Source(file="f", record=0, format="astra"),
    )
    agent = LLMClient(ScriptedBackend(responder=responder(script)), model="scripted")
    ep = interact.TrajectoryEpisode(messages=[dict(m) for m in row["raw_prompt"]])
    async with SandboxPool(SandboxConfig(workers=1)) as pool:
        backend = SandboxTools(pool, toolset)
        hook = TranscriptHook({"name": HOOK, "users": users})
        await interact.drive(agent, ep, server, backend, limits, hook=hook)
        if backend.session is not None:
            await pool.close_session(backend.session)
    assert ep.messages == ep.log.hook_state["transcript"]
    calls = [(c.turn, c.id, c.name or None, c.status.value, c.error_kind) for c in ep.log.calls]
    return summary(ep.log, calls)


@pytest.mark.parametrize("name", list(EPISODES))
def test_the_same_episode_through_all_three_loops(name, trainer_config, tiny_tokenizer, envs, kit):
    script, limits, users = EPISODES[name]
    row = kit.row_kwargs(envs.city, envs.store, interaction={"name": HOOK, "users": users})
    rl = through_agent_loop(trainer_config, tiny_tokenizer, row, script, limits)
    chat = asyncio.run(through_chat(row, script, limits))
    synthesis = asyncio.run(through_synthesis(envs.city, envs.store, row, script, limits, users))
    assert rl == chat == synthesis
    expected = {
        "calls, malformed, unknown, past the cap": (
            (3, 0, "The density is about 20503 people per km2.", "no_tool_call"),
            ["ok", "bad_json", "unknown_tool", "skipped", "schema_error", "ok"],
        ),
        "user turns mid-round and at the end of a round": (
            (4, 2, "Nice has 342669.", "no_tool_call"),
            ["ok", "ok", "ok"],
        ),
        "the user-turn cap": ((2, 1, "Paris has 2161000.", "max_turns"), ["ok"]),
        "the assistant-turn cap": ((2, 0, "", "max_turns"), ["ok"]),
    }[name]
    assert (rl["counts"], [c[3] for c in rl["calls"]]) == expected
    transcript = rl["transcript"]
    ids = [c["id"] for m in transcript if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in transcript if m["role"] == "tool"]
    assert answered == [c[1] for c in rl["calls"]] == ids[: len(answered)]
    # only a turn the episode ended on leaves attempts unanswered (never run): the turn cap's
    assert len(ids) - len(answered) == (1 if name == "the assistant-turn cap" else 0)
    if users and name.startswith("user turns"):
        roles = [m["role"] for m in transcript]
        # the mid-round message waits for the round's second tool message
        assert roles[:7] == ["user", "assistant", "tool", "tool", "user", "assistant", "user"]


# -- the episode's rules, each once wrong in astra_tool_agent (issue #46) ----------------------
def transcript_of(cfg, tokenizer, row, script, server_cls=ScriptedServer):
    server = server_cls(tokenizer, script)
    out = run(make_loop(cfg, server, tokenizer).run({"temperature": 1.0}, **row))
    return out, EpisodeLog.from_extra_fields(out.extra_fields)


def test_verl_max_user_turns_is_refused_and_ours_caps_every_user_message(trainer_config, tiny_tokenizer, envs, kit):
    """verl's `multi_turn.max_user_turns` counts tool rounds too: refused, not read with another meaning.
    `astra.rollout.max_user_turns` caps user messages wherever one would be appended."""
    with pytest.raises(Exception, match=r"astra\.rollout\.max_user_turns"):
        make_loop(trainer_config("actor_rollout_ref.rollout.multi_turn.max_user_turns=2"), None, tiny_tokenizer)
    cfg = trainer_config("+astra.rollout.max_user_turns=1")
    row = kit.row_kwargs(envs.city, envs.store, interaction={"name": HOOK, "users": True})
    script = [kit.call_text("get_population", {"city": "Paris"}), "Paris has 2161000."]
    _, log = transcript_of(cfg, tiny_tokenizer, row, script)
    # the mid-round message is the one user turn; the end-of-round one is refused and ends the episode
    assert (log.user_turns, log.assistant_turns, log.terminated_by.value) == (1, 2, "max_turns")
    assert [m["role"] for m in log.hook_state["transcript"]].count("user") == 2  # the prompt's and one


def test_a_final_answer_ending_exactly_at_the_response_limit_is_kept(trainer_config, tiny_tokenizer, envs, kit):
    answer = "The density is about 20503 people per km2."
    n = len(tiny_tokenizer.encode(answer, add_special_tokens=False)) + 1  # and the end-of-turn token
    cfg = trainer_config(f"actor_rollout_ref.rollout.response_length={n}")
    out, log = transcript_of(cfg, tiny_tokenizer, kit.row_kwargs(envs.city, envs.store), [answer])
    assert len(out.response_ids) == n and log.terminated_by.value == "max_length"
    assert log.final_answer == answer


class SpecDecodeServer(ScriptedServer):
    """A server reporting speculative-decoding counters each turn and no preemption count."""

    async def generate(self, request_id: str, **kw):
        out = await super().generate(request_id, **kw)
        fields = {"spec_num_draft_tokens": 4, "spec_num_accepted_tokens": 2, "spec_num_verify_steps": 1}
        return out.model_copy(update={"extra_fields": fields, "num_preempted": None})


def test_spec_decode_counters_add_up_over_turns_and_unknown_preemption_is_verls_minus_one(
    trainer_config, tiny_tokenizer, envs, kit
):
    paris = kit.call_text("get_population", {"city": "Paris"})
    out, log = transcript_of(
        trainer_config(),
        tiny_tokenizer,
        kit.row_kwargs(envs.city, envs.store),
        [paris, paris, "done"],
        SpecDecodeServer,
    )
    assert log.assistant_turns == 3
    spec = {
        k: out.extra_fields[k] for k in ("spec_num_draft_tokens", "spec_num_accepted_tokens", "spec_num_verify_steps")
    }
    assert spec == {"spec_num_draft_tokens": 12, "spec_num_accepted_tokens": 6, "spec_num_verify_steps": 3}
    assert out.metrics.num_preempted == -1  # verl's ToolAgentLoop: unknown on the first turn is -1


def test_assistant_and_tool_messages_carry_call_ids_and_malformed_attempts(trainer_config, tiny_tokenizer, envs, kit):
    """Every attempt, a malformed one too, is in the assistant message under the id its tool message answers."""
    malformed = '<tool_call>\n{"name": "get_area", "arguments": "Paris"}\n</tool_call>'
    script = [kit.call_text("get_population", {"city": "Paris"}) + malformed, "done"]
    row = kit.row_kwargs(envs.city, envs.store, interaction={"name": HOOK})
    _, log = transcript_of(trainer_config(), tiny_tokenizer, row, script)
    assistant, first, second = log.hook_state["transcript"][1:4]
    assert [(c["id"], c["function"]["name"]) for c in assistant["tool_calls"]] == [
        ("call_0", "get_population"),
        ("call_1", "get_area"),
    ]
    assert assistant["tool_calls"][1]["function"]["arguments"].strip() == '{"name": "get_area", "arguments": "Paris"}'
    assert (first["tool_call_id"], second["tool_call_id"]) == ("call_0", "call_1")
    assert [(c.call_id, c.status.value) for c in log.calls] == [("call_0", "ok"), ("call_1", "bad_json")]
