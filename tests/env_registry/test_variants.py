"""Environment variants of the procedural family (issue 49): generation, the spec's version
rules, the structural `variant` rule, and the golden replay of each variant in the sandbox."""

from __future__ import annotations

import json

import pytest

from env_registry.answer_channel import channel, is_inability, judge, root_question, type_of
from env_registry.families._variants import missing_function, missing_value, no_tool
from env_registry.families.procedural import generate
from env_registry.spec import AnswerType, EnvSpec, ScriptedUser, Variant
from env_registry.structure import Rule, check_structure
from env_registry.variants import MIX, VariantShares, interaction_kwargs


@pytest.fixture(scope="module")
def mixed() -> list[EnvSpec]:
    return generate(60, seed=4, variants=VariantShares.parse("mix"))


def _one(envs: list[EnvSpec], variant: Variant) -> EnvSpec:
    return next(e for e in envs if e.variant is variant)


def test_every_variant_is_generated_structurally_valid_and_deterministic(mixed):
    assert {e.variant for e in mixed} == set(Variant)
    assert all(check_structure(e) == [] for e in mixed), [str(i) for e in mixed for i in check_structure(e)]
    again = generate(60, seed=4, variants=VariantShares.parse("mix"))
    assert [e.id for e in again] == [e.id for e in mixed]
    assert [e.id for e in generate(20, seed=4, variants=VariantShares(shares=dict(MIX)))] == [e.id for e in mixed[:20]]


def test_answerable_only_keeps_every_id_and_version_3():
    plain = generate(8, seed=1)
    assert [e.id for e in generate(8, seed=1, variants=VariantShares.parse("answerable=1"))] == [e.id for e in plain]
    assert all(e.spec_version == 3 and "variant" not in e.to_json() for e in plain)


def test_a_variant_is_version_4_and_round_trips(mixed):
    for variant in Variant:
        env = _one(mixed, variant)
        back = EnvSpec.from_json(env.to_json())
        assert back == env and back.content_hash() == env.id
        assert env.spec_version == (3 if variant is Variant.ANSWERABLE else 4)


def test_version_3_cannot_carry_a_variant(mixed):
    body = _one(mixed, Variant.NO_TOOL).model_dump(mode="json")
    body["spec_version"] = 3
    with pytest.raises(ValueError, match="version 4"):
        EnvSpec.model_validate(body)


def test_a_user_belongs_to_missing_value_only(mixed):
    body = _one(mixed, Variant.NO_TOOL).model_dump(mode="json")
    body["user"] = ScriptedUser(missing="the city", value="X", reply="The city is X.", otherwise="no").model_dump()
    with pytest.raises(ValueError, match="scripted user"):
        EnvSpec.model_validate(body)


def test_declining_roots_are_read_as_an_inability(mixed):
    for variant in (Variant.UNANSWERABLE, Variant.MISSING_FUNCTION):
        env = _one(mixed, variant)
        target = env.reward_target()
        root = root_question(target)
        assert is_inability(root.answer) and not root.needs_tool
        assert type_of(target, root) is AnswerType.INABILITY
        assert env.answer_type is not AnswerType.INABILITY  # the prompt shows the question's own type
        assert judge(channel("cannot answer: no tool gives it"), root.answer, root.match, AnswerType.INABILITY).counted
        assert not judge(channel("cannot answer:"), root.answer, root.match, AnswerType.INABILITY).counted
        assert not judge(channel("42"), root.answer, root.match, AnswerType.INABILITY).counted


def test_unanswerable_has_no_step_left_and_missing_function_keeps_the_earlier_ones(mixed):
    env = _one(mixed, Variant.UNANSWERABLE)
    assert not any(q.needs_tool for q in env.sub_questions)
    env = _one(mixed, Variant.MISSING_FUNCTION)
    steps = [q for q in env.sub_questions if q.needs_tool]
    assert steps and all(q.tool in {t.name for t in env.tools} for q in steps)
    assert set(root_question(env.reward_target()).depends_on) <= {q.id for q in steps}


def test_missing_value_moves_the_entity_to_the_user(mixed):
    env = _one(mixed, Variant.MISSING_VALUE)
    assert env.user is not None and env.user.value not in env.question and env.user.value in env.user.reply
    assert "I have in mind" in env.question
    assert interaction_kwargs(env, {"name": "astra_default"}) == {
        "name": "scripted_user_turns",
        "turns": [env.user.reply],
        "otherwise": env.user.otherwise,
        "answer_ends": True,
    }
    assert interaction_kwargs(_one(mixed, Variant.NO_TOOL), {"name": "astra_default"}) == {"name": "astra_default"}


def test_no_tool_states_its_inputs_and_needs_no_tool(mixed):
    env = _one(mixed, Variant.NO_TOOL)
    assert [q.needs_tool for q in env.sub_questions] == [False] and env.tools
    assert env.sub_questions[0].question == env.question


def test_makers_refuse_environments_that_cannot_carry_them():
    single = next(e for e in generate(10, seed=1) if e.scenario_type.value == "single_hop")
    assert missing_function(single) is None  # one step: nothing earlier to keep
    assert no_tool(single) is None  # its root is a tool's sub-question
    parallel = next(e for e in generate(10, seed=1) if e.scenario_type.value == "parallel_single_hop")
    assert missing_value(parallel) is None  # several entities: which one would the user hold?


@pytest.mark.parametrize(
    ("variant", "change", "says"),
    [
        (Variant.NO_TOOL, lambda b: b["sub_questions"][0].update(answer="cannot answer: x"), "only unanswerable"),
        (Variant.MISSING_VALUE, lambda b: b["user"].update(value="Nobody Known"), "no argument"),
        (Variant.UNANSWERABLE, lambda b: b["sub_questions"][0].update(answer="42"), "declared inability"),
    ],
)
def test_the_variant_rule_names_what_breaks(mixed, variant, change, says):
    body = _one(mixed, variant).model_dump(mode="json")
    change(body)
    if variant is Variant.MISSING_VALUE:
        body["user"]["reply"] = "The thing is Nobody Known."
    broken = EnvSpec.create(**{k: v for k, v in body.items() if k != "id"})
    issues = [i for i in check_structure(broken) if i.rule is Rule.VARIANT]
    assert issues and says in issues[0].message, [str(i) for i in check_structure(broken)]


def test_shares_are_checked():
    with pytest.raises(ValueError, match="sum to 1"):
        VariantShares.parse("answerable=0.5")
    with pytest.raises(ValueError, match="VARIANT=SHARE"):
        VariantShares.parse("answerable=0.5,sometimes=0.5")


def test_golden_replay_validates_every_variant(mixed):
    from env_registry.validate import validate_envs

    report = validate_envs([_one(mixed, v) for v in Variant])
    assert report.ok, [str(i) for i in report.all_issues()]


@pytest.fixture(scope="module")
def exported(tmp_path_factory, mixed):
    from env_registry.export import ExportConfig, export_rows, write_export
    from env_registry.store import EnvStore

    tmp_path = tmp_path_factory.mktemp("variants")
    with EnvStore.open(tmp_path / "store", "a", durable=False) as store:
        store.add_many(mixed)
    store = EnvStore.open(tmp_path / "store")
    cfg = ExportConfig(val_fraction=0.0)
    return write_export(export_rows(store, config=cfg, progress=False), tmp_path / "out", cfg, {}) / "train.parquet"


def test_export_carries_the_scripted_user_in_its_rows(exported, mixed):
    import pyarrow.parquet as pq

    rows = pq.read_table(exported).to_pylist()
    users = {e.id: e.user for e in mixed if e.user is not None}
    seen = 0
    for row in rows:
        kwargs = row["extra_info"]["interaction_kwargs"]
        env_id = json.loads(row["extra_info"]["astra"])["env_id"]
        if env_id in users:
            seen += 1
            assert kwargs["name"] == "scripted_user_turns" and kwargs["turns"] == [users[env_id].reply]
            assert kwargs["answer_ends"] is True and kwargs["otherwise"] == users[env_id].otherwise
        else:
            assert kwargs["name"] == "astra_default"
    assert seen == len(users) > 0


def test_export_sft_demonstrates_each_variant(exported, mixed):
    from env_registry.answer_channel import read
    from env_registry.golden_sft import NoTool, Recovery, golden_rows

    rows, summary = golden_rows(exported, Recovery(share=0.5), no_tool=NoTool(share=0.3))
    by_id = {e.id: e for e in mixed}
    assert set(summary.variants) == {v.value for v in Variant}
    for row in rows:
        env, messages = by_id[row["env_id"]], row["messages"]
        calls = [m for m in messages if m.get("tool_calls") and m.get("weight", 1)]
        final = messages[-1]["content"]
        if row["irrelevant_tools"]:
            assert env.variant is Variant.ANSWERABLE and not calls
            continue
        assert row["variant"] == env.variant.value
        assert len(calls) == sum(q.needs_tool for q in env.sub_questions)
        if env.variant in (Variant.UNANSWERABLE, Variant.MISSING_FUNCTION):
            assert read(final, AnswerType.INABILITY).is_answer
        if env.variant is Variant.MISSING_VALUE:
            first = 2 if messages[0]["role"] == "system" else 1
            ask, reply = messages[first], messages[first + 1]
            assert ask["role"] == "assistant" and not ask.get("tool_calls") and "<answer>" not in ask["content"]
            assert reply == {"role": "user", "content": env.user.reply}
        if env.variant is Variant.NO_TOOL:
            assert messages[-2]["role"] == "user" and "<answer>" in final  # the answer at once


def test_select_shares_keeps_the_largest_subset_in_the_shares(mixed):
    from collections import Counter

    from env_registry.variants import select_shares

    counts = Counter(e.variant for e in mixed)
    kept = select_shares(mixed, VariantShares.parse("answerable=0.5,no_tool=0.5"), seed=1)
    got = Counter(e.variant for e in kept)
    assert set(got) == {Variant.ANSWERABLE, Variant.NO_TOOL} and got[Variant.ANSWERABLE] == got[Variant.NO_TOOL]
    assert got[Variant.NO_TOOL] == counts[Variant.NO_TOOL]
    assert [e.id for e in select_shares(mixed, VariantShares.parse("answerable=0.5,no_tool=0.5"), seed=1)] == [
        e.id for e in kept
    ]
    with pytest.raises(ValueError, match="hold no .*derive-variants"):  # either way to make them
        select_shares([e for e in mixed if e.variant is Variant.ANSWERABLE], VariantShares.parse("mix"))


def test_the_user_script_is_the_one_rule_of_the_scripted_user():
    from env_registry.variants import OTHERWISE, UserScript

    script = UserScript(listed=1, otherwise="I know nothing else.", answer_ends=True)
    assert script.next("Which city?") == 0  # the listed reply
    assert script.next("And its country?") == OTHERWISE  # once
    assert script.next("Anything?") is None  # then the episode ends
    assert UserScript(listed=1, answer_ends=True).next("It is <answer>42</answer>") is None  # an answer ends it
    assert UserScript(listed=1).next("It is <answer>42</answer>") == 0  # as scripted_user_turns always did
