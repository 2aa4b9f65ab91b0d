"""The demo's own plumbing (the demo itself is `make demo`): stage logs are plain text, its
closing pointer to TensorBoard is checked against the event files verl wrote, and its last line
(the rise with its paired standard error) is computed as it says."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from astra_verl.demo import DemoError, check_tensorboard, py, run
from astra_verl.demo_report import golden_response_tokens, paired_rise, per_env_scores, rise_line

# What Ray's log prefixes and verl's console look like on a terminal.
COLOURED = "print('\\x1b[36m(TaskRunner pid=7)\\x1b[0m step:1 - \\x1b[1;32mreward\\x1b[0m:0.5\\x1b[?25h')"


def test_stage_logs_keep_no_ansi_codes(tmp_path):
    out = run(py("-c", COLOURED), tmp_path, log=tmp_path / "grpo.log")
    text = (tmp_path / "grpo.log").read_text()
    assert text == out and "\x1b" not in text
    assert "(TaskRunner pid=7) step:1 - reward:0.5" in text


def test_a_failed_stage_shows_its_plain_tail_and_names_its_log(tmp_path):
    with pytest.raises(DemoError, match=r"(?s)exit 3.*\(TaskRunner pid=7\) step:1.*full log: .*sft.log"):
        run(py("-c", f"{COLOURED}; raise SystemExit(3)"), tmp_path, log=tmp_path / "sft.log")


def test_the_tensorboard_pointer_needs_event_files(tmp_path):
    with pytest.raises(DemoError, match="no TensorBoard events under"):
        check_tensorboard(tmp_path / "tensorboard")
    run_dir = tmp_path / "tensorboard" / "astra" / "grpo"
    run_dir.mkdir(parents=True)
    (run_dir / "events.out.tfevents.1.host").write_bytes(b"x")
    check_tensorboard(tmp_path / "tensorboard")


# -- the rise line: after-GRPO minus after-SFT, paired per environment -----------------------


def _rows(scores: dict[str, float]) -> list[dict]:
    return [{"input": prompt, "score": s} for prompt, s in scores.items()]


def test_the_rise_is_paired_per_environment_with_its_standard_error():
    before = per_env_scores(_rows({"a": 0.0, "b": 0.5, "c": 1.0, "d": 0.2}))
    after = per_env_scores(_rows({"d": 0.6, "c": 1.0, "b": 0.9, "a": 0.4}))  # another order: paired by prompt
    r = paired_rise(before, after)
    # diffs 0.4, 0.4, 0.0, 0.4: mean 0.3, sample sd 0.2, SE 0.2 / 2
    assert (r.n, r.before, r.after) == (4, pytest.approx(0.425), pytest.approx(0.725))
    assert (r.rise, r.se) == (pytest.approx(0.3), pytest.approx(0.1))
    assert not r.inside_noise
    line = rise_line(r)
    assert line.startswith("rise +0.300 ± 0.100 (paired SE over 4 environments; 0.425 -> 0.725)")
    assert "outside the noise" in line


def test_a_rise_within_two_standard_errors_is_called_noise():
    before = {"a": 0.0, "b": 1.0, "c": 0.0}
    after = {"a": 1.0, "b": 0.0, "c": 0.5}  # diffs 1, -1, 0.5: mean 0.167, SE 0.601
    r = paired_rise(before, after)
    assert r.rise == pytest.approx(1 / 6) and r.se == pytest.approx(math.sqrt(1.0833 / 3), abs=1e-3)
    assert r.inside_noise and "inside the noise" in rise_line(r)
    # a drop outside the noise is said as plainly as a rise
    drop = paired_rise({"a": 1.0, "b": 0.9, "c": 0.8}, {"a": 0.5, "b": 0.4, "c": 0.2})
    assert drop.rise == pytest.approx(-8 / 15) and not drop.inside_noise
    assert rise_line(drop).startswith("rise -0.533")


def test_the_rise_needs_shared_environments_and_one_pass():
    with pytest.raises(ValueError, match="no environment was scored both"):
        paired_rise({"a": 1.0}, {"b": 1.0})
    assert paired_rise({"a": 0.0, "x": 1.0}, {"a": 1.0}).n == 1  # only the shared one counts
    assert paired_rise({"a": 0.0}, {"a": 1.0}).inside_noise  # one environment has no noise estimate
    unchanged = paired_rise({"a": 0.5, "b": 1.0}, {"a": 0.5, "b": 1.0})  # every environment as before
    assert unchanged.se == 0 and unchanged.inside_noise and "inside the noise" in rise_line(unchanged)
    with pytest.raises(ValueError, match="holds the prompt twice"):
        per_env_scores(_rows({"a": 0.0}) * 2)


def _sft_row(result: str, recovery: str = "") -> dict:
    call = {"id": "call_0", "type": "function", "function": {"name": "get_area", "arguments": '{"city": "Paris"}'}}
    schema = {"type": "function", "function": {"name": "get_area", "description": "area", "parameters": {}}}
    return {
        "messages": [
            {"role": "user", "content": "What is the area of Paris?"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": result, "tool_call_id": "call_0", "name": "get_area"},
            {"role": "assistant", "content": "105.4"},
        ],
        "tools": json.dumps([schema]),
        "recovery": recovery,
    }


def test_golden_response_tokens_count_the_calls_and_results_a_solved_episode_needs(tmp_path, tiny_model_dir):
    from transformers import AutoTokenizer

    long_result = json.dumps({"area": [round(0.1 * i, 1) for i in range(200)]})  # a year-of-numbers tool
    rows = [_sft_row('{"area": 105.4}'), _sft_row(long_result), _sft_row('{"area": 105.4}', "malformed")]
    path = tmp_path / "sft.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    short, long = golden_response_tokens(path, tiny_model_dir)  # the recovery row is not counted
    tok = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    extra = len(tok(long_result)["input_ids"]) - len(tok('{"area": 105.4}')["input_ids"])
    assert abs((long - short) - extra) <= 2  # the results differ only in content (tokens may merge at edges)
    assert short > len(tok("105.4")["input_ids"]) + len(tok('{"area": 105.4}')["input_ids"])
    assert long > 512  # such an environment cannot be solved within the demo's budget
