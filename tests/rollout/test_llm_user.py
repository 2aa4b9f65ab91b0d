"""The LLM user of missing-value environments (`llm_user_turns`, issue 49): an LLM words what the
user says at a listed turn, while when it speaks stays `UserScript`'s rule (the scripted hook's)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from astra_foundation.llm.fake_server import FakeOpenAIServer, chat_reply
from astra_verl.rollout.episode_hook import create_hook
from astra_verl.rollout.hooks import LLM_USER_KEYS, HookError, LLMUserTurnsHook, ScriptedUserTurnsHook
from env_registry.answer_channel import final_message
from env_registry.families.procedural import generate
from env_registry.llm_user import MISSING_VALUE_USER_PROMPT
from env_registry.spec import EnvSpec, Variant
from env_registry.variants import OTHERWISE, LLMUserConfig, UserScript, VariantShares, ask_message, interaction_kwargs

VIEW = SimpleNamespace(request_id="r", messages=[], shown_tools=[], log=None, env=None)
LLM_SAYS = "Oh, sorry: I mean the one I wrote down."  # no scripted reply says this


@pytest.fixture(scope="module")
def env() -> EnvSpec:
    return next(
        e for e in generate(40, seed=4, variants=VariantShares.parse("mix")) if e.variant is Variant.MISSING_VALUE
    )


def _llm_kwargs(env: EnvSpec, base_url: str = "http://127.0.0.1:9/v1") -> dict:
    return interaction_kwargs(env, {"name": "astra_default"}, LLMUserConfig(base_url=base_url, model="user-model"))


async def _with_server(body):
    """`body(base_url, seen)` against a fake user model that says LLM_SAYS; `seen`: each request's messages."""
    seen: list[list[dict]] = []

    def handler(payload, n):
        seen.append(payload["messages"])
        return chat_reply(LLM_SAYS)

    server = FakeOpenAIServer(handler, models=("user-model",))
    base_url = await server.start()
    try:
        return await body(base_url, seen), seen
    finally:
        await server.stop()


def test_the_rows_llm_user_is_the_llm_user_hook(env):
    kwargs = _llm_kwargs(env)
    assert kwargs["name"] == "llm_user_turns" and kwargs["turns"] == env.user.turns()
    assert isinstance(create_hook(kwargs, default="astra_default", interaction_config_path=None), LLMUserTurnsHook)


def test_the_llm_words_the_user_and_is_told_the_held_value_and_the_agents_question(env):
    question = ask_message(env)

    async def body(base_url, seen):
        hook = LLMUserTurnsHook(_llm_kwargs(env, base_url))
        said = await hook.on_assistant_end(VIEW, question)
        return said, await hook.on_end(VIEW)

    (said, state), seen = asyncio.run(_with_server(body))
    assert said.user_message == LLM_SAYS != env.user.reply  # the model's words, not the scripted reply
    assert len(seen) == 1
    system, agent = seen[0]
    assert system["role"] == "system" and system["content"].startswith(MISSING_VALUE_USER_PROMPT.split("{")[0])
    for fact in (env.user.value, env.user.missing, env.question):
        assert fact in system["content"]
    assert agent == {"role": "user", "content": question}  # roles swapped: the agent is the model's user
    assert state == {"user_turns_listed": 1}  # the scripted hook's count: one listed turn


# the agent's turns (without calls) of several episodes; "A" is an answer (it holds a channel)
EPISODES = [["ask", "ask", "ask", "ask"], ["A", "ask"], ["ask", "A"], ["ask", "ask", "A"]]


@pytest.mark.parametrize("turns", EPISODES)
def test_when_the_llm_user_speaks_is_the_scripted_users_rule(env, turns):
    contents = [final_message(env) if t == "A" else ask_message(env) for t in turns]

    async def replay(hook) -> list[str | None]:
        out = []
        for content in contents:
            action = await hook.on_assistant_end(VIEW, content)
            out.append(None if action is None else action.user_message)
            if action is None:
                break
        await hook.on_end(VIEW)
        return out

    async def body(base_url, seen):
        kwargs = _llm_kwargs(env, base_url)
        return await replay(ScriptedUserTurnsHook(kwargs)), await replay(LLMUserTurnsHook(kwargs))

    (scripted, llm), seen = asyncio.run(_with_server(body))
    script = UserScript(len(env.user.turns()), env.user.otherwise, answer_ends=True)
    steps = []
    for content in contents:
        steps.append(script.next(content))
        if steps[-1] is None:
            break
    as_said = {OTHERWISE: env.user.otherwise, None: None}
    assert scripted == [as_said.get(s, env.user.reply) for s in steps]
    assert llm == [as_said.get(s, LLM_SAYS) for s in steps]  # the same turns; listed ones worded by the model
    assert len(seen) == sum(isinstance(s, int) for s in steps)  # the model is asked at listed turns only


@pytest.mark.parametrize("key", LLM_USER_KEYS)
@pytest.mark.parametrize("bad", [None, "", 3])
def test_a_missing_or_bad_llm_user_key_is_refused_naming_it(env, key, bad):
    kwargs = _llm_kwargs(env)
    if bad is None:
        del kwargs[key]
    else:
        kwargs[key] = bad
    with pytest.raises(HookError, match=rf"llm_user_turns: interaction_kwargs\.{key} must be .*export-parquet"):
        LLMUserTurnsHook(kwargs)
