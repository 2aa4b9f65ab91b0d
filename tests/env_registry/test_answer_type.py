"""Issue 48, the producers: every environment declares the type of its answer, validation refuses
one whose answer does not parse in it, every exported row's system prompt states the channel and
the type, and golden demonstrations end with the channel (which the reward credits)."""

from __future__ import annotations

import pytest

from astra_verl.calls.call_log import CallRecord, EpisodeLog
from astra_verl.reward.f1 import score_episode
from env_registry.answer_channel import OPEN, final_message, inferred_type, instruction
from env_registry.call_gate import CallStatus
from env_registry.export import ExportConfig, messages_for
from env_registry.families.procedural import generate
from env_registry.golden_sft import Recovery, golden_rows
from env_registry.spec import AnswerType, EnvSpec
from env_registry.structure import Rule, check_structure


def test_the_procedural_generator_declares_each_type_and_its_answers_parse_in_it(envs):
    types = {e.answer_type for e in envs}
    assert {AnswerType.NUMBER, AnswerType.NAME, AnswerType.DATE} <= types, types
    for env in envs:
        assert not [i for i in check_structure(env) if i.rule is Rule.ANSWER_TYPE], env.id
        assert inferred_type(env) in (env.answer_type, AnswerType.TEXT), env.id  # names of no candidate: text


def test_validation_refuses_an_environment_whose_answer_does_not_parse_in_its_type():
    env = next(e for e in generate(40, seed=5) if e.answer_type is AnswerType.NUMBER)
    wrong = env.model_copy(update={"answer_type": AnswerType.DATE}).with_id()
    issues = [i for i in check_structure(wrong) if i.rule is Rule.ANSWER_TYPE]
    assert issues and "does not parse as one date" in issues[0].message and issues[0].field == "answer_type"
    root = env.sub_questions[-1]
    listed = env.model_copy(
        update={
            "answer_type": None,
            "final_answer": "1 or 2",
            "sub_questions": [*env.sub_questions[:-1], root.model_copy(update={"answer": "1 or 2"})],
        }
    ).with_id()
    assert any("parses in none" in i.message for i in check_structure(listed) if i.rule is Rule.ANSWER_TYPE)


def test_a_version_2_record_cannot_carry_an_answer_type_and_keeps_its_id():
    env = generate(1, seed=2)[0]
    data = env.model_dump(mode="json")
    with pytest.raises(ValueError, match="cannot carry answer_type"):
        EnvSpec.model_validate({**data, "spec_version": 2})
    v2 = EnvSpec.model_validate({**data, "spec_version": 2, "answer_type": None, "id": ""}).with_id()
    assert "answer_type" not in v2.to_json() and v2.reward_target().answer_type is None


def test_every_exported_prompt_states_the_channel_and_the_type(envs):
    for env in envs[:20]:
        for prompt in (ExportConfig().system_prompt, None):  # `--no-system-prompt` keeps the channel's line
            system = messages_for(env, prompt)[0]
            assert system["role"] == "system" and instruction(env.answer_type) in system["content"], env.id
            assert OPEN in system["content"]


def test_golden_demonstrations_end_with_the_channel_and_score_one(tmp_path_factory, store_path, envs):
    from env_registry.export import export_rows, write_export
    from env_registry.store import EnvStore

    cfg = ExportConfig(val_fraction=0)
    result = export_rows(EnvStore.open(store_path), config=cfg, progress=False)
    folder = write_export(result, tmp_path_factory.mktemp("rl"), cfg, {})
    rows, _ = golden_rows(folder / "train.parquet", Recovery(share=0))
    by_id = {e.id: e for e in envs}
    for row in rows[:20]:
        env = by_id[row["env_id"]]
        last = row["messages"][-1]
        assert last["role"] == "assistant" and last["content"] == final_message(env)
        calls = [
            CallRecord(turn=i, index=0, tool=m["name"], arguments={}, status=CallStatus.OK, output=m["content"])
            for i, m in enumerate(row["messages"])
            if m["role"] == "tool"
        ]
        target = env.reward_target()
        # the golden call's arguments are checked elsewhere: here the final answer alone must count
        assert score_episode(
            EpisodeLog(env_id=env.id, calls=calls, final_answer=last["content"]), target
        ).final_answer_correct
