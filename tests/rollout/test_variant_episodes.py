"""Variant environments (issue 49) played through `astra_tool_agent` with the interaction the
export writes into their rows (the scripted user of a missing-value environment), scored by the reward."""

from __future__ import annotations

import pytest

from astra_verl.calls.call_log import EpisodeLog, Termination
from astra_verl.reward.f1 import score_episode
from astra_verl.rollout.testing import ScriptedServer, make_loop, run
from env_registry.answer_channel import final_message
from env_registry.families.procedural import generate
from env_registry.spec import EnvSpec, Variant
from env_registry.variants import VariantShares, ask_message, interaction_kwargs


@pytest.fixture(scope="module")
def cfg(trainer_config):
    return trainer_config()


@pytest.fixture(scope="module")
def variant_envs() -> dict[Variant, EnvSpec]:
    envs = generate(40, seed=4, variants=VariantShares.parse("mix"))
    return {v: next(e for e in envs if e.variant is v) for v in Variant}


def _play(cfg, tokenizer, kit, tmp_path, env: EnvSpec, script: list[str]):
    store = kit.write_store(tmp_path / "store", [env])
    row = kit.row_kwargs(env, store, interaction=interaction_kwargs(env, {"name": "astra_default"}))
    loop = make_loop(cfg, ScriptedServer(tokenizer, script), tokenizer)
    out = run(loop.run({"temperature": 1.0}, **row))
    log = EpisodeLog.from_extra_fields(out.extra_fields)
    return log, score_episode(log, env.reward_target())


def _golden_calls(kit, env: EnvSpec, value: str | None = None, wrong: str | None = None) -> list[str]:
    script = []
    for q in env.sub_questions:
        if q.needs_tool:
            golden = next(g for g in env.tool(q.tool).golden_calls if q.id in g.answers)
            args = golden.args
            if wrong is not None:  # the held value replaced by an invented one
                args = {k: (wrong if v == value else [wrong] if v == [value] else v) for k, v in args.items()}
            script.append(kit.call_text(q.tool, args))
    return script


def test_missing_value_asked_answered_called_scores_1(cfg, tiny_tokenizer, kit, tmp_path, variant_envs):
    env = variant_envs[Variant.MISSING_VALUE]
    script = [ask_message(env), *_golden_calls(kit, env), final_message(env)]
    log, score = _play(cfg, tiny_tokenizer, kit, tmp_path, env, script)
    assert log.user_turns == 1 and log.terminated_by is Termination.NO_TOOL_CALL
    assert score.f1 == pytest.approx(1.0, abs=1e-5)


def test_missing_value_invented_value_solves_nothing(cfg, tiny_tokenizer, kit, tmp_path, variant_envs):
    env = variant_envs[Variant.MISSING_VALUE]
    script = [*_golden_calls(kit, env, env.user.value, "Invented Name"), final_message(env)]
    log, score = _play(cfg, tiny_tokenizer, kit, tmp_path, env, script)
    assert log.user_turns == 0 and score.f1 == 0.0  # the answer ended the episode: no user turn


def test_missing_value_user_knows_nothing_else_then_ends(cfg, tiny_tokenizer, kit, tmp_path, variant_envs):
    env = variant_envs[Variant.MISSING_VALUE]
    script = ["Which one?", "And what else?", "Anything more?", "unused"]
    log, score = _play(cfg, tiny_tokenizer, kit, tmp_path, env, script)
    assert log.user_turns == 2 and log.assistant_turns == 3 and score.f1 == 0.0


@pytest.mark.parametrize("variant", [Variant.UNANSWERABLE, Variant.MISSING_FUNCTION, Variant.NO_TOOL])
def test_golden_episode_of_each_variant_scores_1(cfg, tiny_tokenizer, kit, tmp_path, variant_envs, variant):
    env = variant_envs[variant]
    log, score = _play(cfg, tiny_tokenizer, kit, tmp_path, env, [*_golden_calls(kit, env), final_message(env)])
    assert score.f1 == pytest.approx(1.0, abs=1e-5) and score.final_answer_correct
    assert log.num_calls == sum(q.needs_tool for q in env.sub_questions)
