"""Issues 31 and 39 case by case: the commit rule of final answers, the dependency rule of
leaves, the matcher's number formats and script boundaries, one tolerance policy, and echo
answers retrieved by their golden call."""

from __future__ import annotations

import pytest

from astra_verl.calls.call_log import CallRecord, EpisodeLog
from astra_verl.calls.solved import solved_by_call, solved_set
from astra_verl.reward.f1 import score_episode
from env_registry.call_gate import CallStatus
from env_registry.commit import commits
from env_registry.matching import answer_in_output, answer_in_text, args_agree, normalize_text
from env_registry.spec import AnswerRule, CallCheck, RewardTarget, TargetSubQuestion

TWO = AnswerRule(kind="text", rivals=["Lokoulfield"])
THREE = AnswerRule(kind="text", rivals=["Yarnby", "Zelt City"])
NUMBER, EXACT = AnswerRule(kind="numeric"), AnswerRule(kind="numeric", rel_tol=0, abs_tol=0)
X = "Vilko Logistics"


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("Vilko Logistics beats Yarnby and Zelt City.", THREE),
        ("Among Vilko Logistics, Yarnby and Zelt City, the answer is Vilko Logistics.", THREE),
        ("Vilko Logistics (1947), ahead of Yarnby (1428) and Zelt City (1203).", THREE),
        ("Yarnby has 1428. Vilko Logistics has 1947. So the answer is Vilko Logistics.", THREE),
        ("Vilko Logistics was founded more recently than Lokoulfield.", TWO),
        ("Which of Vilko Logistics and Lokoulfield was founded most recently? Vilko Logistics.", TWO),
        ("Vilko.", TWO),
        ("答案是Vilko Logistics。", TWO),
        ("Vilko Logistics比Lokoulfield新。", TWO),
        ("答えはVilko Logisticsです。", TWO),
        ("Lokoulfieldより Vilko Logisticsの方が新しいです。", TWO),
        ("정답은 Vilko Logistics입니다.", TWO),
    ],
)
def test_an_answer_commits_to_its_candidate_however_phrased(text, rule):
    assert commits(X, text, rule), text


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("Vilko Logistics or Yarnby or Zelt City.", THREE),
        ("Yarnby, Zelt City or Vilko Logistics.", THREE),
        ("Either Lokoulfield or Vilko Logistics", TWO),
        ("Lokoulfield was founded more recently than Vilko Logistics.", TWO),
        ("Error (exception): ValueError: No company named 'Kouholm'", TWO),
        ("答案是Lokoulfield。", TWO),
    ],
)
def test_lists_hedges_and_other_candidates_do_not_commit(text, rule):
    assert not commits(X, text, rule), text


def test_script_changes_are_word_boundaries_in_text_and_numbers():
    assert normalize_text("答案是Lepaburg。") == " 答 案 是 lepaburg "
    assert answer_in_text("Lepaburg", "答案是Lepaburg。", AnswerRule(kind="text"))
    assert answer_in_text("東京", "答えは東京です", AnswerRule(kind="text"))
    for text in ("答案是42。", "答えは42です。", "정답은 42입니다.", "42公里"):
        assert answer_in_text("42", text, EXACT), text
    assert not answer_in_text("York", "Yorkshire", AnswerRule(kind="text"))


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        ("1969 km", "It is <answer>1969km</answer>."),
        ("1200.5 USD", "<answer>USD 1,200.50</answer>"),
        ("1095393 km²", "<answer>about 1.095393e6 km²</answer>"),
        ("1095393 km²", "<answer>1.095393 × 10^6 km²</answer>"),
        ("0.084", "It grew by <answer>8.4%</answer>"),
        ("94.67 mm", "<answer>94.67mm</answer>"),
        ("94.67 mm", "<answer>about 94.7 mm</answer>"),
        ("1976-07-20", "<answer>July 20, 1976</answer>"),
        ("1976-07-20", "<answer>7/20/1976</answer>"),
        ("1976-07-20", "<answer>20 July 1976</answer>"),
    ],
)
def test_number_and_date_formats_count_in_final_answer_correct(answer, text):
    target = RewardTarget(
        env_id="e",
        final_answer=answer,
        sub_questions=[TargetSubQuestion(id="q1", answer=answer.split()[0], needs_tool=True, tool="t")],
    )
    assert score_episode(EpisodeLog(env_id="e", final_answer=text), target).final_answer_correct, text


def test_hedges_and_ranges_of_numbers_do_not_commit():
    for text in (
        "8.40% or 9.1%",
        "It is 6.72, 8.40 or 10.50 %.",
        "between 8.40 and 9",
        "8.40-9.00",
        "It is 8.40. Or 9.",
    ):
        assert not commits("8.40", text, NUMBER), text
    for text in ("From 2673.7 to 2898.3 is an increase of 8.40%.", "It went from 12.5% to 8.40%.", "8.40"):
        assert commits("8.40", text, NUMBER), text


def test_thousands_separators_and_dates_are_read_one_way():
    assert not answer_in_text("234", "1,234", EXACT)
    assert not answer_in_text("12", "12,000", EXACT)
    assert answer_in_text("12000", "12,000", EXACT)
    assert answer_in_text("234", "[1,234]", EXACT)  # a JSON list written without spaces
    assert not answer_in_text("2004", "2004-05-06", EXACT)
    assert answer_in_text("2004", "founded in 2004", EXACT)


def test_numbers_inside_a_free_text_argument_are_masked():
    assert not answer_in_output("42", '{"note": "about 42"}', {"note": "about 42"}, EXACT)
    assert answer_in_output("42", '{"note": "about 40", "result": 42}', {"note": "about 40"}, EXACT)


def test_one_tolerance_policy_for_arguments_and_answers():
    check = CallCheck(params=["value", "year"], golden=[{"value": 23.345, "year": 2021}])
    assert args_agree({"value": 23.3, "year": 2021}, check)  # rounded to one decimal, as stated
    assert not args_agree({"value": 23.4, "year": 2021}, check)
    assert not args_agree({"value": 23.345, "year": 2022}, check)  # integers exactly
    assert not args_agree({"value": 23.0, "year": 2021}, check)  # "23.0" states a tenth: too far
    assert answer_in_text("23.345", "about 23.3", NUMBER)
    assert not answer_in_text("0.345", "about 0.3", NUMBER)  # one significant digit is not a rounding


def _call(arguments: dict, output: str) -> CallRecord:
    return CallRecord(turn=1, index=0, tool="stats", arguments=arguments, status=CallStatus.OK, output=output)


def test_an_answer_equal_to_an_argument_is_retrieved_by_the_golden_call_only():
    check = CallCheck(params=["values", "statistic"], unordered=[], golden=[{"values": [3, 7, 5], "statistic": "max"}])
    q = TargetSubQuestion(id="q1", answer="7", needs_tool=True, tool="stats", match=EXACT, call_check=check)
    target = RewardTarget(env_id="e", final_answer="7", sub_questions=[q])
    golden = _call({"values": [3, 7, 5], "statistic": "max"}, '{"values": [3, 7, 5], "result": 7}')
    assert solved_by_call(golden, target) == ["q1"]
    echo = _call({"values": [7], "statistic": "max"}, '{"values": [7], "result": 7}')
    assert solved_by_call(echo, target) == []


def test_a_leaf_counts_only_when_its_dependencies_were_solved():
    target = RewardTarget(
        env_id="e",
        final_answer=X,
        final_match=TWO,
        sub_questions=[
            TargetSubQuestion(id="q1", answer="1947", needs_tool=True, tool="t1", match=EXACT),
            TargetSubQuestion(id="q2", answer="1428", needs_tool=True, tool="t2", match=EXACT),
            TargetSubQuestion(id="q3", answer=X, needs_tool=False, match=TWO, depends_on=["q1", "q2"]),
        ],
    )
    guess = EpisodeLog(env_id="e", final_answer=f"<answer>{X}</answer>")
    assert solved_set(guess, target) == set()
    assert score_episode(guess, target).f1 == 0.0
    one = EpisodeLog(
        env_id="e",
        calls=[CallRecord(turn=1, index=0, tool="t1", arguments={}, status=CallStatus.OK, output="1947")],
        final_answer=f"<answer>{X}</answer>",
    )
    assert solved_set(one, target) == {"q1"}
    both = one.model_copy(
        update={
            "calls": [
                *one.calls,
                CallRecord(turn=1, index=1, tool="t2", arguments={}, status=CallStatus.OK, output="1428"),
            ]
        }
    )
    assert solved_set(both, target) == {"q1", "q2", "q3"}
