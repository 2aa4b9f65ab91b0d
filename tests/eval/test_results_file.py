"""The one results-file rule of every evaluation (`astra_verl.eval.results`): typed lines, one run
per file, the same resume and crash handling for `eval bfcl`, `bfcl-single`, `envs` and `tau`."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from astra_foundation.errors import UserError
from astra_verl.eval import bfcl_run, bfcl_single, envs, tau_report
from astra_verl.eval.results import ResultsFile, ResultsFileError


@dataclass
class Evaluation:
    """How one evaluation opens its results file for a run (`open(path, model, setting)`) and makes
    a record of that run; `other`: a setting that makes results incomparable (None: none recorded)."""

    name: str
    open: Callable[..., ResultsFile]
    record: Callable[[str, Any], Any]
    setting: Any
    other: Any

    def __repr__(self) -> str:
        return self.name


def _bfcl(model: str, _setting: Any) -> bfcl_run.BfclResult:
    return bfcl_run.BfclResult(
        id="multi_turn_base_0", category="base", model=model, status="scored", valid=True, verdict={}, episode={}
    )


def _single(model: str, style: str) -> bfcl_single.SingleResult:
    return bfcl_single.SingleResult(
        id="simple_python_0", category="simple_python", style=style, model=model, status="scored", valid=True
    )


def _envs(policy: str, temperature: float) -> envs.EnvEpisode:
    return envs.EnvEpisode(
        id="0:0", policy=policy, env_id="e0", row=0, sample=0, data_source="astra/x", domain="geography",
        scenario_type="single_hop", hops=1, temperature=temperature, reward=1.0, f1=1.0, precision=1.0, recall=1.0,
        solved=1, n=1, calls=1, invalid_calls=0, distractor_calls=0, tool_errors=0, turns=2,
        final_answer_correct=True, terminated_by="no_tool_call", response="", response_sha="", elapsed_s=0.1,
    )  # fmt: skip


def _tau(policy: str, tasks: str) -> tau_report.TauResult:
    return tau_report.TauResult(
        id="0:0", task=f"{tasks}/0", sample=0, policy=policy, reward=1.0, tau_reward=1.0, tau_r_actions=1.0,
        tau_r_outputs=1.0, tau_outputs_required=0.0, tau_action_f1=1.0, tau_calls=2.0, tau_turns_after_prompt=1.0,
        ended_by="user_stop", terminated_by="hook", elapsed_s=1.0,
    )  # fmt: skip


EVALUATIONS = [
    Evaluation("bfcl", lambda path, model=None, _s=None: bfcl_run.results_file(path, model), _bfcl, None, None),
    Evaluation(
        "bfcl-single", lambda path, model=None, style=None: bfcl_single.results_file(path, style, model), _single,
        "fc", "prompting",
    ),
    Evaluation("envs", lambda path, policy=None, t=None: envs.results_file(path, policy, t), _envs, 0.0, 1.0),
    Evaluation(
        "tau", lambda path, policy=None, tasks=None: tau_report.results_file(path, policy, tasks), _tau,
        "retail/test", "airline/test",
    ),
]  # fmt: skip


@pytest.mark.parametrize("ev", EVALUATIONS, ids=repr)
def test_a_file_of_another_model_is_refused_and_the_same_run_resumes(tmp_path, ev):
    path = tmp_path / "results.jsonl"
    first = ev.open(path, "model-a", ev.setting)
    record = ev.record("model-a", ev.setting)
    first.append(record)

    again = ev.open(path, "model-a", ev.setting)  # the same run resumes: its scored id is done
    assert again.done(record.id) and again.records[record.id] == record
    with pytest.raises(ResultsFileError) as refused:
        ev.open(path, "model-b", ev.setting)
    message = str(refused.value)
    assert isinstance(refused.value, UserError)
    assert message.startswith(f"{path} holds results of ") and "'model-a'" in message and "'model-b'" in message
    assert "(line 1)" in message and f"pass another --out or delete {path}" in message
    # a reader that then appends another model's record is refused the same way
    with pytest.raises(ResultsFileError, match="holds results of"):
        ev.open(path).append(ev.record("model-b", ev.setting))
    assert len(path.read_text().splitlines()) == 1


@pytest.mark.parametrize("ev", [e for e in EVALUATIONS if e.other is not None], ids=repr)
def test_a_file_of_other_settings_is_refused(tmp_path, ev):
    path = tmp_path / "results.jsonl"
    ev.open(path, "m", ev.setting).append(ev.record("m", ev.setting))
    with pytest.raises(ResultsFileError, match=f"{ev.other!r}"):
        ev.open(path, "m", ev.other)


def test_a_record_of_another_run_than_the_writers_is_a_bug_not_a_user_error(tmp_path):
    results = bfcl_run.results_file(tmp_path / "results.jsonl", "a")
    with pytest.raises(ValueError, match="a bug in the evaluation") as e:
        results.append(_bfcl("b", None))
    assert not isinstance(e.value, UserError)


def _line(**extra: Any) -> str:
    return json.dumps({**_bfcl("m", None).model_dump(exclude_none=True), **extra})


def test_a_bfcl_multi_turn_line_with_an_unknown_key_is_refused(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(_line() + "\n" + _line(id="multi_turn_base_1", surprise=1) + "\n")
    with pytest.raises(ResultsFileError) as e:
        bfcl_run.results_file(path)
    assert str(e.value).startswith(f"{path}: line 2: eval bfcl results record: unknown keys ['surprise']")
    assert "pass another --out or delete it" in str(e.value)


def test_a_bfcl_multi_turn_line_of_a_wrong_type_names_the_field(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(_line(valid="yes") + "\n")
    with pytest.raises(ResultsFileError, match=r"line 1: eval bfcl results record.valid must be true or false"):
        bfcl_run.results_file(path)


def test_another_version_is_named_with_what_to_do(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(_line(version=2) + "\n")
    with pytest.raises(ResultsFileError) as e:
        bfcl_run.results_file(path, "m")
    assert str(e.value) == (
        f"{path}: line 1 is a version-2 eval bfcl results record; this astra-verl reads and writes version 1: "
        "pass another --out (or delete the file) and run the evaluation again"
    )
    path.write_text(json.dumps({"id": "x", "status": "scored"}) + "\n")
    with pytest.raises(ResultsFileError, match=r"line 1 lacks a version or an id \(eval bfcl results record\)"):
        bfcl_run.results_file(path)


def test_a_torn_last_line_is_cut_off_and_garbage_elsewhere_refused(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(_line() + "\n" + '{"version": 1, "id": "multi_turn_base_1", "sta')
    results = bfcl_run.results_file(path, "m")
    assert list(results.records) == ["multi_turn_base_0"] and not results.done("multi_turn_base_1")
    results.append(_bfcl("m", None).model_copy(update={"id": "multi_turn_base_1"}))
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == [
        "multi_turn_base_0",
        "multi_turn_base_1",
    ]
    path.write_text("not json\n" + _line() + "\n")
    with pytest.raises(ResultsFileError, match=r"line 1 is not JSON \(and not a torn last line\)"):
        bfcl_run.results_file(path)


def test_a_complete_last_record_without_its_newline_is_kept(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(_line())  # a crash between the record and its newline
    results = bfcl_run.results_file(path, "m")
    assert results.done("multi_turn_base_0")
    results.append(_bfcl("m", None).model_copy(update={"id": "multi_turn_base_1"}))
    assert len(bfcl_run.results_file(path).records) == 2


def test_error_records_run_again_and_the_last_record_of_an_id_wins(tmp_path):
    path = tmp_path / "results.jsonl"
    results = bfcl_run.results_file(path, "m")
    error = bfcl_run.BfclResult(id="a", category="base", model="m", status="error", valid=False, error="X: down")
    results.append(error)
    assert not bfcl_run.results_file(path).done("a")
    results.append(_bfcl("m", None).model_copy(update={"id": "a"}))
    back = bfcl_run.results_file(path)
    assert back.done("a") and back.records["a"].status == "scored"
    assert "error" not in json.loads(Path(path).read_text().splitlines()[1])  # fields a record lacks: not written
