"""Issue 48: the final answer is one typed value in the answer channel, and only that is scored.

The first two tables are the red team's cases, through `score_episode` after honest calls: every
dishonest final answer loses the root (each was credited by the free-text commit rule), and every
honest one keeps it (each lost credit under that rule or states its value in a form it did not
read). They build their targets and final answers without the new module, so they run unchanged
on the code before the channel and fail there.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from astra_verl.calls.call_log import CallRecord, EpisodeLog
from astra_verl.calls.solved import root_question
from astra_verl.reward.f1 import score_episode
from env_registry.call_gate import CallStatus
from env_registry.spec import AnswerRule, RewardTarget, TargetSubQuestion

NAMES = AnswerRule(kind="text", rivals=["Sarstalburg"])


def _number(answer: str, final: str) -> tuple[RewardTarget, list[CallRecord]]:
    target = RewardTarget(
        env_id="e",
        final_answer=final,
        sub_questions=[TargetSubQuestion(id="q1", answer=answer, tool="t1", needs_tool=True)],
    )
    return target, [_call("t1", json.dumps({"value": float(answer)}))]


def _call(tool: str, output: str) -> CallRecord:
    return CallRecord(turn=1, index=0, tool=tool, arguments={}, status=CallStatus.OK, output=output)


def _comparison() -> tuple[RewardTarget, list[CallRecord]]:
    """Which is colder in March, Kaswick (-3.4) or Sarstalburg (5.3)?"""
    target = RewardTarget(
        env_id="e",
        final_answer="Kaswick",
        final_match=NAMES,
        sub_questions=[
            TargetSubQuestion(id="q1", answer="-3.4", needs_tool=True, tool="t1"),
            TargetSubQuestion(id="q2", answer="5.3", needs_tool=True, tool="t2"),
            TargetSubQuestion(id="leaf", answer="Kaswick", needs_tool=False, match=NAMES, depends_on=["q1", "q2"]),
        ],
    )
    return target, [_call("t1", '{"march_mean_c": -3.4}'), _call("t2", '{"march_mean_c": 5.3}')]


def _date() -> tuple[RewardTarget, list[CallRecord]]:
    target = RewardTarget(
        env_id="e",
        final_answer="2025-05-30",
        sub_questions=[TargetSubQuestion(id="q1", answer="2025-05-30", needs_tool=True, tool="t1")],
    )
    return target, [_call("t1", '{"opened": "2025-05-30"}')]


def _chain() -> tuple[RewardTarget, list[CallRecord]]:
    """Which weekday is the festival held by the company based in the city ... (a chain of names)."""
    answers = ["Nosmere", "Krilvath Film Expo", "2026-01-06", "Tuesday"]
    target = RewardTarget(
        env_id="e",
        final_answer="Tuesday",
        sub_questions=[
            TargetSubQuestion(id=f"q{i}", answer=a, needs_tool=True, tool=f"t{i}") for i, a in enumerate(answers, 1)
        ],
    )
    return target, [_call(f"t{i}", json.dumps({"value": a})) for i, a in enumerate(answers, 1)]


MM = ("156.33", "156.33 mm")
OUTPUTS = '{"value": 156.33}'
DISHONEST = [
    (MM, "The answer is not 156.33 mm."),
    (MM, "The answer is not 156.33 mm. <answer>not 156.33 mm</answer>"),
    (MM, f"I could not determine the answer. Tool outputs: {OUTPUTS} | {OUTPUTS}"),
    (MM, json.dumps([OUTPUTS])),
    (MM, f"I could not determine the answer. <answer>{OUTPUTS}</answer>"),
    (MM, "At first I got 156.33 mm. On reflection it is 214.17 mm."),
    (MM, "At first I got <answer>156.33 mm</answer>. On reflection it is <answer>214.17 mm</answer>."),
    (MM, "<answer>214.17 mm</answer>"),
    (MM, "156.33, 214.17, 98.2, 3"),
    (MM, "<answer>156.33, 214.17, 98.2, 3</answer>"),
    (MM, "<answer>156.33 mm?</answer>"),
    (MM, "The answer is −156.33 mm."),
    (MM, "<answer>−156.33 mm</answer>"),
    (MM, "<answer>between 150 and 156.33 mm</answer>"),
    (MM, "<answer>cannot answer: no tool measures distances</answer>"),
    (MM, "156.33 mm"),  # the value in prose, no channel
    (("0.866648", "0.866648 ZEX per MAD"), "0.866648 ZEX per MAD or 0.632590 ZEX per MAD"),
    (("0.866648", "0.866648 ZEX per MAD"), "<answer>0.866648 ZEX per MAD or 0.632590 ZEX per MAD</answer>"),
    ("chain", "Nosmere? Krilvath Film Expo? 2026-01-06? Tuesday?"),
    ("chain", "<answer>Nosmere? Krilvath Film Expo? 2026-01-06? Tuesday?</answer>"),
    ("chain", "It is either Krilvath Film Expo or Tuesday."),
    ("chain", "<answer>either Krilvath Film Expo or Tuesday</answer>"),
    ("comparison", "Kaswick? Sarstalburg?"),
    ("comparison", "<answer>Kaswick? Sarstalburg?</answer>"),
    ("comparison", "It is either Kaswick or Sarstalburg."),
    ("comparison", "<answer>either Kaswick or Sarstalburg</answer>"),
    ("comparison", "<answer>Kaswick, Sarstalburg</answer>"),
    ("comparison", "<answer>not Sarstalburg</answer>"),
]


def _setup(which):
    if which == "comparison":
        return _comparison()
    if which == "date":
        return _date()
    if which == "chain":
        return _chain()
    return _number(*which)


@pytest.mark.parametrize(("which", "final"), DISHONEST)
def test_a_dishonest_final_answer_after_the_golden_calls_loses_the_root(which, final):
    target, calls = _setup(which)
    score = score_episode(EpisodeLog(env_id="e", calls=calls, final_answer=final), target)
    assert root_question(target).id not in score.solved_ids, final
    assert score.solved == len(target.sub_questions) - 1 and not score.final_answer_correct, final


# (target, prose the red team found losing the root or misread, the channel's content)
HONEST = [
    ("comparison", "Kaswick is coldest in March (-3.4), while Sarstalburg has 5.3.", "Kaswick"),
    ("comparison", "Compared with Sarstalburg, Kaswick is colder.", "Kaswick"),
    ("comparison", "Between Sarstalburg and Kaswick, it is Kaswick that is colder.", "Kaswick"),
    ("comparison", "Kaswick холоднее, чем Sarstalburg.", "Kaswick"),
    ("comparison", "Kaswick è più freddo di Sarstalburg.", "Kaswick"),
    ("comparison", "Sarstalburg is warmer, at 5.3.", "Kaswick"),
    ("comparison", '{"answer": "Kaswick", "evidence": {"Kaswick": -3.4, "Sarstalburg": 5.3}}', "Kaswick"),
    ("comparison", "| city | °C |\n|---|---|\n| Sarstalburg | 5.3 |\n| Kaswick | -3.4 |", "**KASWICK**"),
    (("1227.79", "1227.79 NAL"), "Approximately 1,228 NAL.", "1,228 NAL"),
    (("2153400", "2153400 people"), "About 2.15 million people.", "2.15 million"),
    (("163.34", "163.34 USD"), "743.14 CON converts to 163.34 USD.", "163.34 USD"),
    (("1074", "1074 m"), "1074 m / 3,524 ft", "1074 m"),
    (("-3.4", "-3.4 °C"), "It is −3.4 °C.", "−3.4 °C"),
    (("1200000", "1200000 km²"), "About 1.2 × 10^6 km².", "1.2 × 10^6 km²"),
    (("1200000", "1200000 km²"), "About 1.2e6 km².", "1.2e6 km²"),
    ("date", "It opened on 30.05.2025.", "30.05.2025"),
    ("date", "It opened on May 30, 2025.", "May 30, 2025"),
    ("date", "It opened on 30 May 2025.", "30 May 2025"),
    ("date", "It opened on 5/30/2025.", "5/30/2025"),
]


PLACED = [
    (*case, where)
    for case in HONEST
    for where in ("first", "last", *(["inline"] if case[2].strip("*") in case[1] else []))
]


def _place(prose: str, content: str, where: str) -> str:
    """The channel before the prose, after it, or in place of the value inside it."""
    channel = f"<answer>{content}</answer>"
    if where == "inline":  # "<answer>Kaswick</answer> is coldest ..., while Sarstalburg has 5.3."
        return prose.replace(content.strip("*"), channel, 1)
    return f"{channel}\n{prose}" if where == "first" else f"{prose}\n{channel}"


@pytest.mark.parametrize(("which", "prose", "content", "where"), PLACED)
def test_the_honest_value_in_the_channel_keeps_full_credit_whatever_the_prose(which, prose, content, where):
    target, calls = _setup(which)
    final = _place(prose, content, where)
    score = score_episode(EpisodeLog(env_id="e", calls=calls, final_answer=final), target)
    assert score.f1 == pytest.approx(1.0, abs=1e-5) and score.final_answer_correct, final


# -- the parser --------------------------------------------------------------------------------


def test_each_type_parses_one_value_or_says_why_not():
    from env_registry.answer_channel import parse, read
    from env_registry.spec import AnswerType

    assert float(parse("USD 1,200.50", AnswerType.NUMBER).value[0][0]) == 1200.5
    assert float(parse("−3.4 °C", AnswerType.NUMBER).value[0][0]) == -3.4
    assert parse("2.15 million", AnswerType.NUMBER).value[0][0] == 2150000
    assert parse("Tuesday, July 20, 1976", AnswerType.DATE).value == dt.date(1976, 7, 20)
    assert parse("20/7/1976", AnswerType.DATE).value == dt.date(1976, 7, 20)  # 20 is no month
    assert parse("Zürich-Nord", AnswerType.NAME).value == "zurich nord"
    why = {
        "156.33 mm or 214.17 mm": "several numbers",
        "not 156.33": "negation",
        "156.33?": "question mark",
        '{"a": 1}': "dump",
        "": "empty",
        "cannot answer:": "naming no missing capability",
    }
    for content, reason in why.items():
        got = parse(content, AnswerType.NUMBER)
        assert not got.is_answer and reason in got.problem, (content, got)
    assert read("<answer>1</answer><answer>2</answer>", AnswerType.NUMBER).problem.startswith("2 answer channels")
    assert read("It is 42.", AnswerType.NUMBER).content is None
    inability = parse("cannot answer: no tool gives exchange rates", AnswerType.NUMBER)
    assert inability.inability == "no tool gives exchange rates" and not inability.is_answer


def test_aliases_count_and_names_fold_case_accents_and_punctuation():
    from env_registry.answer_channel import judge
    from env_registry.spec import AnswerType

    rule = AnswerRule(kind="text", aliases=["NYC"], rivals=["Boston"])
    for said in ("new york", "New-York.", "NYC", "the New York"):
        assert judge(f"<answer>{said}</answer>", "New York", rule, AnswerType.NAME).counted, said
    verdict = judge("<answer>Chicago</answer>", "New York", rule, AnswerType.NAME)
    assert not verdict.counted and "none of the candidates" in verdict.why


def test_the_tolerance_policy_applies_to_the_parsed_number():
    from env_registry.answer_channel import judge
    from env_registry.spec import AnswerType

    rule = AnswerRule()
    assert judge("<answer>1,228</answer>", "1227.79", rule, AnswerType.NUMBER).counted  # 4 significant digits
    assert judge("<answer>94.7 mm</answer>", "94.67", rule, AnswerType.NUMBER).counted
    assert not judge("<answer>0.3</answer>", "0.345", rule, AnswerType.NUMBER).counted  # 1 digit: no rounding
    assert not judge("<answer>1,230</answer>", "1227.79", rule, AnswerType.NUMBER).counted
    assert judge("<answer>8.4%</answer>", "0.084", rule, AnswerType.NUMBER).counted
