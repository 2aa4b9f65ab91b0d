"""SFT synthesis and RL refuse the same calls with the same bytes (env_registry.call_gate).

The same OpenAI tool calls (an unknown tool, arguments that are not JSON, empty arguments, a
schema violation, a tool that fails) go once through `data_synth traj interact` (the InteractStep
of the trajectory pipeline, as the CLI runs it) and once through the RL toolset
(`Toolset.execute`, with the tools' code in the sandbox, as the eval chat rollout reads an
OpenAI call). The agent must read byte-identical observations and both logs name the same status.
"""

from __future__ import annotations

import asyncio
import json

from astra_foundation.llm import LLMConfig, build_client
from astra_foundation.llm.types import ToolCall
from astra_foundation.sandbox import SandboxConfig, SandboxPool
from astra_verl.eval.chat_rollout import parsed_call
from astra_verl.rollout.toolset import ToolCatalog
from data_synth.pipeline import process_one
from data_synth.traj import steps as S
from data_synth.traj.interact import InteractConfig
from data_synth.traj.records import ScoredTask, Scores, Server, Source, Task, ToolDoc
from env_registry.call_gate import CallStatus
from env_registry.rows import RowInfo, ToolRef

SHOWN = ("bump_counter", "always_fails")
# conftest's `always_fails` raises RuntimeError("backend unavailable"); the synthesis simulator
# reports the message the sandbox gave for it (the failure is the same, the wording is the loops').
FAILURE = "RuntimeError: backend unavailable"
CALLS = [
    ("bump_countr", '{"step": 1}', CallStatus.UNKNOWN_TOOL),
    ("bump_counter", '{"step": 1', CallStatus.BAD_JSON),
    ("bump_counter", "", CallStatus.BAD_JSON),
    ("bump_counter", '["step"]', CallStatus.BAD_JSON),
    ("bump_counter", '{"step": 0}', CallStatus.SCHEMA_ERROR),
    ("bump_counter", '{"steps": 2}', CallStatus.SCHEMA_ERROR),
    ("always_fails", '{"x": "a"}', CallStatus.TOOL_ERROR),
    ("bump_counter", '{"step": 2}', CallStatus.OK),
]


def tool_calls() -> list[ToolCall]:
    return [ToolCall.from_openai({"function": {"name": n, "arguments": a}}, i) for i, (n, a, _) in enumerate(CALLS)]


def synthesis(counter, failure: str) -> list[tuple[str, CallStatus]]:
    tools = [ToolDoc(name=t.name, description=t.description, parameters=t.parameters) for t in counter.tools]
    server = Server(
        key="tally",
        server_id="tally",
        title="Tally",
        name="tally",
        tools=[t for t in tools if t.name in SHOWN],
        source=Source(file="f", record=0, format="astra"),
    )
    task = Task.create(server_id="tally", source="server", tools=list(SHOWN), query="Bump it.", prompt="p@v1")
    item = ScoredTask(key=task.key, task=task, scores=Scores(question_quality=5, scenario_realism=5, tool_necessity=5))
    calls = [{"name": n, "arguments": a} for n, a, _ in CALLS]

    def agent(step, payload):
        done = any(m["role"] == "tool" for m in payload["messages"])
        return "Done." if done else {"content": "", "tool_calls": calls}

    def simulator(step, payload):
        text = payload["messages"][-1]["content"]
        if "Call: always_fails" in text:
            return json.dumps({"status": "error", "result": failure})
        return json.dumps({"status": "ok", "result": {"count": 2}})

    ctx = S.TrajContext(
        llm=build_client(LLMConfig(max_retries=0), responder=simulator),
        servers={"tally": server},
        agent=build_client(LLMConfig(max_retries=0), responder=agent),
    )
    env = asyncio.run(process_one(S.InteractStep(InteractConfig(failure_rate=0.0)), item, ctx))
    assert env.status == "ok", env.detail
    return [(c["observation"], CallStatus(c["status"])) for c in env.out[0]["calls"]]


def rl(envs) -> list[tuple[str, CallStatus]]:
    row = RowInfo(env_id=envs.counter.id, store=envs.store, tools=[ToolRef(envs.counter.id, n) for n in SHOWN])
    toolset = ToolCatalog().toolset(row)

    async def go():
        async with SandboxPool(SandboxConfig(workers=1)) as pool:
            session = await pool.open_session(toolset.program)

            async def opened():
                return session

            records = [
                await toolset.execute(parsed_call(c), toolset.initially_shown, pool, opened, turn=1, index=i)
                for i, c in enumerate(tool_calls())
            ]
            await pool.close_session(session)
            return records

    return [(r.output, r.status) for r in asyncio.run(go())]


def test_synthesis_and_rl_give_byte_identical_observations(envs):
    rolled_out = rl(envs)
    assert [s for _, s in rolled_out] == [s for _, _, s in CALLS]
    prefix = "Error (exception): "
    assert rolled_out[6][0].startswith(prefix + FAILURE)
    synthesised = synthesis(envs.counter, rolled_out[6][0][len(prefix) :])
    for (name, args, _), syn, rl_ in zip(CALLS, synthesised, rolled_out, strict=True):
        assert syn == rl_, f"{name}({args!r})"
    texts = [t for t, _ in rolled_out]
    assert texts[0].startswith("Error (unknown_tool): there is no tool named 'bump_countr'")
    assert texts[1].startswith("Error (bad_json): arguments are not valid JSON")
    assert texts[4].startswith("Error (schema_error): arguments of 'bump_counter' do not match")
    assert json.loads(texts[7]) == {"count": 2}
