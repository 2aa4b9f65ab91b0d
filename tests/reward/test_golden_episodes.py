"""End to end on real environments: procedural envs of many seeds, their golden calls run in the
sandbox, the outputs scored. A trajectory that makes exactly the golden calls and states the
final answer scores F1 = 1; one that skips a call loses that sub-question; the same outputs from
a distractor, in the model's own text, or from a call with other identifying arguments solve
nothing. This checks the definition of "solved" against the tool outputs the environments
really produce, not against hand-written strings."""

from __future__ import annotations

import asyncio

import pytest

from astra_verl.calls.call_log import CallRecord, EpisodeLog
from astra_verl.reward.f1 import score_episode
from env_registry.answer_channel import final_message
from env_registry.call_gate import CallStatus
from env_registry.families.procedural import generate
from env_registry.spec import tool_module


async def golden_outputs(envs):
    """{env id: [(sub-question, tool, arguments, observation)]} from the golden call of every
    tool-needing question."""
    from astra_foundation.sandbox import SandboxConfig, SandboxPool
    from astra_foundation.sandbox.protocol import Module, Program

    out = {}
    async with SandboxPool(SandboxConfig(workers=1)) as sandbox:
        for env in envs:
            program = Program(tuple(Module(name=tool_module(t.name, env.id), source=t.source) for t in env.tools))
            session = await sandbox.open_session(program)
            try:
                rows = []
                for q in (q for q in env.sub_questions if q.needs_tool):
                    golden = next(g for g in env.tool(q.tool).golden_calls if q.id in g.answers)
                    res = await sandbox.call(session, tool_module(q.tool, env.id), q.tool, golden.args)
                    assert res.ok, (env.id, q.id, res.message)
                    rows.append((q, q.tool, golden.args, res.text))
                out[env.id] = rows
            finally:
                await sandbox.close_session(session)
    return out


@pytest.fixture(scope="module")
def envs_and_outputs():
    envs = [e for seed in range(10) for e in generate(5, seed=seed, max_hops=4)]
    return envs, asyncio.run(golden_outputs(envs))


def log_for(env, rows, *, final_answer=None, distractor=False) -> EpisodeLog:
    calls = [
        CallRecord(
            turn=i + 1, index=0, tool=tool, arguments=args, status=CallStatus.OK, output=text,
            distractor=distractor, source_env="env-other" if distractor else env.id,
        )
        for i, (_, tool, args, text) in enumerate(rows)
    ]  # fmt: skip
    return EpisodeLog(
        env_id=env.id,
        calls=calls,
        assistant_turns=len(calls) + 1,
        final_answer=final_message(env) if final_answer is None else final_answer,
    )


def test_golden_trajectories_score_one(envs_and_outputs):
    envs, outputs = envs_and_outputs
    for env in envs:
        s = score_episode(log_for(env, outputs[env.id]), env.reward_target())
        assert (s.solved, s.n) == (len(env.sub_questions), len(env.sub_questions)), env.id
        assert s.reward == pytest.approx(1.0, abs=1e-6), env.id
        assert s.final_answer_correct


def test_a_skipped_golden_call_loses_its_sub_question(envs_and_outputs):
    envs, outputs = envs_and_outputs
    for env in envs:
        rows = outputs[env.id]
        s = score_episode(log_for(env, rows[1:]), env.reward_target())
        assert rows[0][0].id not in s.solved_ids, env.id
        assert s.recall < 1.0


def test_golden_outputs_from_a_distractor_or_in_the_models_text_solve_nothing(envs_and_outputs):
    envs, outputs = envs_and_outputs
    for env in envs:
        target = env.reward_target()
        tool_ids = {q.id for q in env.sub_questions if q.needs_tool}
        s = score_episode(log_for(env, outputs[env.id], distractor=True), target)
        assert not tool_ids & set(s.solved_ids), env.id
        everything_said = " ".join(text for *_, text in outputs[env.id]) + " " + env.final_answer
        s = score_episode(log_for(env, [], final_answer=everything_said), target)
        assert not tool_ids & set(s.solved_ids), env.id


def test_golden_outputs_under_other_identifying_arguments_solve_nothing(envs_and_outputs):
    """The right output with the wrong question: the golden observation attributed to a call whose
    entity, key or modifier differs (every identifying argument replaced) solves nothing."""
    envs, outputs = envs_and_outputs
    for env in envs:
        target = env.reward_target()
        for q, tool, args, text in outputs[env.id]:
            key = env.tool(tool).call_key
            other = {**args, **{p: "something else" for p in key.params}}
            s = score_episode(log_for(env, [(q, tool, other, text)], final_answer=""), target)
            assert q.id not in s.solved_ids, (env.id, q.id, other)
