"""The definition of "solved" (astra_verl/calls/solved.py), case by case."""

from __future__ import annotations

from astra_verl.calls.solved import solved_by_call, solved_by_final_answer, solved_set
from env_registry.call_gate import CallStatus


def test_a_successful_call_to_the_own_tool_with_the_answer_solves(build):
    t = build.target()
    assert solved_by_call(build.solving_call(1), t) == ["q1"]
    assert solved_by_call(build.solving_call(2), t) == ["q2"]  # numeric within tolerance
    assert solved_by_call(build.solving_call(3), t) == ["q3"]  # case-insensitive text


def test_the_answer_in_another_tools_output_does_not_solve(build):
    t = build.target()
    assert solved_by_call(build.call("t2", '{"population": 1200}'), t) == []


def test_a_distractors_output_with_the_answer_does_not_solve(build):
    t = build.target()
    # same name as an own tool, but mixed in from another environment
    assert solved_by_call(build.call("t1", "1200", distractor=True, source_env="env-other"), t) == []
    assert solved_by_call(build.call("t1", "1200", source_env="env-other"), t) == []
    assert solved_by_call(build.call("t1", "1200", distractor=True), t) == []


def test_failed_calls_do_not_solve_even_when_their_message_echoes_the_answer(build):
    t = build.target()
    for status in (CallStatus.TOOL_ERROR, CallStatus.SCHEMA_ERROR, CallStatus.BAD_JSON, CallStatus.SKIPPED):
        assert solved_by_call(build.call("t1", "error: population=1200 is not allowed", status), t) == []


def test_an_answer_only_in_the_models_own_text_does_not_solve_a_tool_question(build):
    t = build.target()
    log = build.episode([build.call("t1", '{"population": 999}')], final_answer="It is 1200, Lisbon, Blue Line, 3.75")
    assert solved_set(log, t) == set()


def test_a_non_tool_leaf_is_solved_by_the_final_answers_channel_only(build):
    t = build.target(n_tool=1, leaf="2400")
    assert solved_by_final_answer("The total is <answer>2,400 people</answer>.", t) == ["leaf"]
    assert solved_by_final_answer("The total is 2,400 people.", t) == []  # prose is not read
    # a tool output holding the leaf's answer does not solve the leaf
    log = build.episode([build.call("t1", "1200 and 2400")], final_answer="no idea")
    assert solved_set(log, t) == {"q1"}
    assert solved_set(build.episode([build.solving_call(1)], final_answer="<answer>2400</answer>"), t) == {"q1", "leaf"}


def test_a_target_question_naming_no_tool_accepts_any_own_tool(build):
    t = build.target(n_tool=1)
    t.sub_questions[0].tool = None
    assert solved_by_call(build.call("anything", "1200"), t) == ["q1"]
    assert solved_by_call(build.call("anything", "1200", distractor=True), t) == []


def test_one_output_may_solve_several_questions_of_one_tool(build):
    t = build.target(n_tool=2)
    t.sub_questions[1].tool = "t1"
    assert solved_by_call(build.call("t1", '{"population": 1200, "rate": 3.75}'), t) == ["q1", "q2"]


def test_solved_set_counts_each_question_once_and_ignores_empty_episodes(build):
    t = build.target()
    calls = [build.solving_call(1), build.solving_call(1, index=1), build.solving_call(3)]
    assert solved_set(build.episode(calls), t) == {"q1", "q3"}
    assert solved_set(build.episode([], final_answer=""), t) == set()
