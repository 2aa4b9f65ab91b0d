"""The hook registry, the shipped hooks, and verl<=0.7 interactions loaded from a YAML file."""

from __future__ import annotations

import json
import textwrap
from types import SimpleNamespace

import pytest
from testkit import importable_package

from astra_verl.rollout.episode_hook import create_hook
from astra_verl.rollout.hooks import (
    AstraDefaultHook,
    EnvironmentHook,
    HookError,
    ScriptedUserTurnsHook,
    UserTurn,
    parse_user_turns,
    register_hook,
    registered_hooks,
)
from astra_verl.rollout.verl_interaction import Interactions, VerlInteractionHook, load_interactions
from env_registry.rows import ToolRef

# An interaction written the verl <= 0.7 way (its one import changed: verl 0.9.1 has no
# verl.interactions, and we do not fake one): subclass BaseInteraction,
# keep per-instance state in a dict, answer each assistant turn with feedback and a score.
OLD_STYLE_INTERACTION = '''
from uuid import uuid4

from astra_verl.rollout.verl_interaction import BaseInteraction


class GuessInteraction(BaseInteraction):
    """Asks for the secret until the assistant says it; ends the conversation then."""

    def __init__(self, config):
        super().__init__(config)
        self._instance_dict = {}

    async def start_interaction(self, instance_id=None, secret=None, **kwargs):
        if instance_id is None:
            instance_id = str(uuid4())
        self._instance_dict[instance_id] = {"secret": str(secret), "reward": 0.0, "tries": 0}
        return instance_id

    async def generate_response(self, instance_id, messages, **kwargs):
        state = self._instance_dict[instance_id]
        state["tries"] += 1
        content = ""
        for item in reversed(messages):
            if item.get("role") == "assistant":
                content = item.get("content") or ""
                break
        if state["secret"] in content:
            state["reward"] = 1.0
            return True, "Correct!", 1.0, {"tries": state["tries"]}
        hint = self.config.get("hint", "try again")
        return False, f"Wrong, {hint}.", 0.0, {"tries": state["tries"]}

    async def calculate_score(self, instance_id, **kwargs):
        return self._instance_dict[instance_id]["reward"]

    async def finalize_interaction(self, instance_id, **kwargs):
        FINALIZED.append(instance_id)
        del self._instance_dict[instance_id]


FINALIZED = []


class EchoInteraction(BaseInteraction):
    """Relies on the base class for everything but the response."""

    async def generate_response(self, instance_id, messages, **kwargs):
        return False, "echo: " + (messages[-1].get("content") or ""), None, {}
'''


@pytest.fixture
def interaction_config(tmp_path, monkeypatch):
    """A YAML config naming the old-style interaction above, importable from tmp_path."""
    importable_package(tmp_path, "old_interactions", {"guess": OLD_STYLE_INTERACTION}, monkeypatch)
    cfg = tmp_path / "interaction_config.yaml"
    cfg.write_text(
        textwrap.dedent(
            """\
            interaction:
              - name: guess
                class_name: old_interactions.guess.GuessInteraction
                config:
                  hint: "the number is larger"
              - class_name: old_interactions.guess.EchoInteraction
            """
        )
    )
    return str(cfg)


def view(messages=None):
    return SimpleNamespace(request_id="req-1", messages=messages or [], shown_tools=[], log=None, env=None)


def run(coro):
    from verl.utils.ray_utils import get_event_loop

    return get_event_loop().run_until_complete(coro)


def test_registry_and_default():
    assert {"astra_default", "scripted_user_turns"} <= set(registered_hooks())
    assert isinstance(create_hook({}, default="astra_default", interaction_config_path=None), AstraDefaultHook)
    hook = create_hook({"name": "scripted_user_turns", "turns": ["more?"]}, default="x", interaction_config_path=None)
    assert isinstance(hook, ScriptedUserTurnsHook)
    with pytest.raises(HookError, match="not a registered hook"):
        create_hook({"name": "nope"}, default="astra_default", interaction_config_path=None)


def test_register_hook_refuses_a_second_class_under_one_name():
    @register_hook("test_unique_hook")
    class One(EnvironmentHook):
        pass

    with pytest.raises(HookError, match="already registered"):

        @register_hook("test_unique_hook")
        class Two(EnvironmentHook):
            pass


def test_astra_default_does_nothing():
    hook = AstraDefaultHook({})
    assert run(hook.on_start(view())) is None
    assert run(hook.on_assistant_end(view(), "42")) is None
    assert run(hook.on_end(view())) == {}
    assert hook.tool_pool() == []


def test_scripted_turns_one_at_a_time_with_tools():
    turns = ["first follow-up", {"content": "now use the new tool", "add_tools": [{"env_id": "e1", "name": "t"}]}]
    for raw in (turns, json.dumps(turns)):
        hook = ScriptedUserTurnsHook({"turns": raw})
        assert hook.tool_pool() == [ToolRef("e1", "t")]
        a1 = run(hook.on_assistant_end(view(), "x"))
        a2 = run(hook.on_assistant_end(view(), "y"))
        assert (a1.user_message, a1.add_tools) == ("first follow-up", ())
        assert (a2.user_message, a2.add_tools) == ("now use the new tool", (ToolRef("e1", "t"),))
        assert run(hook.on_assistant_end(view(), "z")) is None
        assert run(hook.on_end(view())) == {"user_turns_listed": 2}


def test_one_user_turn_record_for_every_hook():
    """The scripted hook's wire format (tool refs) and BFCL's (bare names of the row's env) are one
    record; each hook lists its turns the same way (turns after the prompt's; the delivered count
    is the episode's `EpisodeLog.user_turns`, not a hook's)."""
    from astra_verl.benchmarks.bfcl_hook import BfclMultiTurnHook
    from astra_verl.benchmarks.tau_hook import TauUserHook
    from astra_verl.rollout.hooks import TURNS_LISTED

    scripted = ["more?", {"content": "and this?", "add_tools": [{"env_id": "e1", "name": "t"}]}]
    bfcl = [{"content": "more?", "add_tools": []}, {"content": "and this?", "add_tools": ["t"]}]
    expected = [UserTurn(content="more?"), UserTurn(content="and this?", add_tools=(ToolRef("e1", "t"),))]
    assert parse_user_turns(scripted, "s") == parse_user_turns(json.dumps(bfcl), "b", env_id="e1") == expected
    with pytest.raises(HookError, match="bare names need interaction_kwargs.env_id"):
        parse_user_turns(bfcl, "s")

    log = SimpleNamespace(assistant_turns=1, parser="astra_bfcl_qwen", user_turns=0)
    v = SimpleNamespace(log=log, tool_schemas=lambda refs: [])
    bfcl_hook = BfclMultiTurnHook({"env_id": "e1", "turns": json.dumps([{"content": "2nd"}, {"content": "3rd"}])})
    tau = TauUserHook({"user": "scripted", "script": json.dumps(["1st", "2nd", "3rd"])})
    hooks = [ScriptedUserTurnsHook({"turns": ["2nd", "3rd"]}), bfcl_hook, tau]
    for hook in hooks:
        log.user_turns = 0
        opening = run(hook.on_start(v))
        while (action := run(hook.on_assistant_end(v, "ok"))) is not None and action.user_message:
            log.user_turns += 1  # what the loop counts: user messages after the prompt
        state = run(hook.on_end(v))
        assert (state[TURNS_LISTED], log.user_turns) == (2, 2), hook.name
        assert not any("deliver" in key for key in state), hook.name  # one counter: the episode's
        assert opening is None or opening.user_message == "1st"  # τ's opening message goes into the prompt


@pytest.mark.parametrize(
    ("turns", "match"),
    [
        (None, "missing"),
        ("not json", "not JSON"),
        ({"a": 1}, "must be a list"),
        ([3], r"turns\[0\]"),
        ([{"content": "x", "add_tools": [{"name": "t"}]}], "env_id and name"),
    ],
)
def test_scripted_turns_bad_config(turns, match):
    with pytest.raises(HookError, match=match):
        ScriptedUserTurnsHook({"turns": turns})


def test_yaml_config_builds_named_instances(interaction_config):
    interactions = load_interactions(interaction_config)
    assert sorted(interactions) == ["echo", "guess"]  # echo: class name minus "Interaction", lower-cased
    assert interactions["guess"].config == {"hint": "the number is larger", "name": "guess"}
    assert interactions["echo"].name == "echo"
    loaded = Interactions()  # a worker's (RolloutContext.interactions): each file built once per worker
    assert loaded.load(interaction_config) is loaded.load(interaction_config)
    assert load_interactions(interaction_config) is not interactions  # the loader itself keeps nothing


def test_old_style_interaction_through_the_hook(interaction_config):
    hook = create_hook(
        {"name": "guess", "secret": 7}, default="astra_default", interaction_config_path=interaction_config
    )
    assert isinstance(hook, VerlInteractionHook)
    v = view([{"role": "user", "content": "guess"}, {"role": "assistant", "content": "5"}])
    assert run(hook.on_start(v)) is None
    wrong = run(hook.on_assistant_end(v, "5"))
    assert (wrong.user_message, wrong.terminate, wrong.turn_score) == ("Wrong, the number is larger.", False, 0.0)
    v.messages.append({"role": "assistant", "content": "it is 7"})
    right = run(hook.on_assistant_end(v, "it is 7"))
    assert (right.user_message, right.terminate, right.turn_score) == ("Correct!", True, 1.0)
    state = run(hook.on_end(v))
    assert state == {
        "interaction": "guess",
        "score": 1.0,
        "turn_scores": [0.0, 1.0],
        "turn_extras": [{"tries": 1}, {"tries": 2}],
    }
    import old_interactions.guess as module

    assert module.FINALIZED[-1] == "req-1"  # the instance id is the episode's request id


def test_base_interaction_defaults(interaction_config):
    hook = create_hook({"name": "echo"}, default="astra_default", interaction_config_path=interaction_config)
    v = view([{"role": "assistant", "content": "hi"}])
    run(hook.on_start(v))
    action = run(hook.on_assistant_end(v, "hi"))
    assert (action.user_message, action.terminate, action.turn_score) == ("echo: hi", False, None)
    assert run(hook.on_end(v))["score"] == 0.0


def test_interaction_config_errors(tmp_path, interaction_config):
    def write(text):
        p = tmp_path / f"cfg{abs(hash(text))}.yaml"
        p.write_text(textwrap.dedent(text))
        return str(p)

    dup = write("""\
        interaction:
          - {name: a, class_name: old_interactions.guess.GuessInteraction}
          - {name: a, class_name: old_interactions.guess.EchoInteraction}
        """)
    with pytest.raises(HookError, match="duplicate interaction name 'a'"):
        load_interactions(dup)
    with pytest.raises(HookError, match="not found"):
        load_interactions(write("interaction:\n  - {class_name: old_interactions.guess.Missing}\n"))
    with pytest.raises(HookError, match="top-level list"):
        load_interactions(write("interactions: []\n"))
    with pytest.raises(HookError, match="not a registered hook .* or in"):
        create_hook({"name": "absent"}, default="astra_default", interaction_config_path=interaction_config)
