"""The generator's listing order and echo answers: the winner of a comparison sits at
every listing position equally often, and `env_registry stats` reports both counts."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from env_registry.answer_stats import echo_answers, winner_position
from env_registry.cli import main
from env_registry.families._tasks import _winner_at_random
from env_registry.families.procedural import generate
from env_registry.spec import ScenarioType
from env_registry.store import EnvStore


@pytest.mark.parametrize("k", [2, 3, 4])
def test_the_winner_is_listed_at_a_uniformly_drawn_position(k):
    for best in range(k):
        placed = Counter(_winner_at_random(best, [f"task {i}", list(range(k)), True]).index(best) for i in range(2000))
        assert set(placed) == set(range(k))
        assert all(abs(n / 2000 - 1 / k) < 0.05 for n in placed.values()), placed


def test_generated_comparisons_list_their_winner_where_it_was_drawn():
    envs = generate(40, seed=3, scenario_types=[ScenarioType.PARALLEL_SINGLE_HOP])
    positions = Counter(w for e in envs if (w := winner_position(e)))
    assert sum(positions.values()) >= 30
    assert {p for (k, p) in positions if k == 2} == {1, 2}  # the winner is not always listed first
    for e in envs:
        leaf = next(q for q in e.sub_questions if not q.needs_tool)
        listed = sorted([leaf.answer, *leaf.match.rivals], key=e.question.find)
        assert listed == sorted([leaf.answer, *leaf.match.rivals], key=leaf.question.find), e.id  # one order


def test_an_answer_that_echoes_its_golden_calls_argument_is_counted(tmp_path, capsys):
    env = next(e for e in generate(30, seed=3) if e.scenario_type is ScenarioType.SINGLE_HOP)
    assert echo_answers(env) == 0
    echoing = env.model_copy(deep=True)
    q, tool = echoing.sub_questions[0], echoing.tools[0]
    golden = next(g for g in tool.golden_calls if q.id in g.answers or g.expected == q.answer)
    entity = next(v for v in golden.args.values() if isinstance(v, str))
    q.answer = golden.expected = entity  # "what is the name of X?" answered "X"
    assert echo_answers(echoing) == 1
    store = tmp_path / "s"
    with EnvStore.open(store, "a") as s:
        s.add_many([env, echoing.with_id()])
    assert main(["--store", str(store), "-q", "stats", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["echo_answer_sub_questions"] == 1 and "winner_position" in summary
