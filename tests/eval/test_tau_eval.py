"""`python -m astra_verl.eval tau`: rows built once, episodes through astra_tool_agent with the
scripted user, τ-bench's reward, pass^k, resumable results."""

from __future__ import annotations

import json
import re
import socket

import pandas as pd
import pytest
from taukit import require_tau_bench

from astra_foundation.llm import PreflightError
from astra_foundation.llm.fake_server import chat_reply, serve_in_thread
from astra_foundation.strict import SettingsError
from astra_verl.eval import cli, tau_report
from astra_verl.eval.results import ResultsFileError
from astra_verl.eval.tau_eval import TauEvalConfig, TauEvaluation, report
from astra_verl.eval.tau_preflight import check_fit, served_context
from astra_verl.eval.tau_report import pass_hat_k
from astra_verl.rollout.testing import ScriptedServer

OVERRIDES = ["data.max_prompt_length=16384", "data.max_response_length=16384"]


def test_pass_hat_k_is_taus():
    records = tau_report.read_results(
        [_record("a", k, r) for k, r in enumerate((1.0, 1.0, 0.0))]
        + [_record("b", k, r) for k, r in enumerate((1.0, 0.0, 0.0))]
    )
    scores = pass_hat_k(records, 3)
    assert scores[1] == pytest.approx((2 / 3 + 1 / 3) / 2) and scores[2] == pytest.approx((1 / 3 + 0) / 2)
    assert scores[3] == 0.0 and pass_hat_k(records[:2], 3) == {}


def test_settings_need_the_user_endpoint(tmp_path):
    with pytest.raises(SettingsError, match="--user-base-url and --user-model"):
        TauEvalConfig(domain="retail", out=tmp_path, model_path="m")
    with pytest.raises(SettingsError, match="--n > 1 needs --temperature"):
        TauEvalConfig(domain="retail", out=tmp_path, model_path="m", user="scripted", n=2)


def test_a_run_scores_gold_policies_and_resumes(tmp_path, tiny_model_dir, tiny_tokenizer):
    require_tau_bench()
    cfg = TauEvalConfig(
        domain="retail",
        split="dev",
        out=tmp_path,
        model_path=str(tiny_model_dir),
        user="scripted",
        limit=2,
        overrides=OVERRIDES,
    )
    evaluation = TauEvaluation(cfg, progress=False)
    assert len(pd.read_parquet(tmp_path / "rows" / "retail_dev.parquet")) == 2  # built on first use
    targets = [json.loads(r["reward_model"]["ground_truth"]) for r in evaluation.rows]
    gold = {t["task"]: json.loads(t["actions"]) for t in targets}

    def script(prompt: str, k: int) -> str:
        # The policy: task 0's gold actions whatever the task (right on retail/dev/0 only), then a reply.
        actions = gold["retail/dev/0"]
        if k < len(actions):
            return (
                "<tool_call>\n"
                + json.dumps({"name": actions[k]["name"], "arguments": actions[k]["kwargs"]})
                + "\n</tool_call>"
            )
        return "Your order is cancelled."

    evaluation.server = ScriptedServer(tiny_tokenizer, script)
    records = evaluation.run()
    by_task = {r.task: r for r in records}
    assert by_task["retail/dev/0"].reward == 1.0 and by_task["retail/dev/1"].reward == 0.0
    assert all(r.ended_by == "user_stop" and r.tau_turns_after_prompt >= 0 for r in records)
    table, plot = report(cfg, records)
    assert f"| {cfg.name} | retail/dev | 2 | 1 | 0.500 |" in table and plot.stat().st_size > 0
    assert (tmp_path / "table.txt").read_text() == table + "\n"
    again = TauEvaluation(cfg, progress=False)
    assert again.todo() == [] and len(again.run()) == 2  # resumed: nothing left to run
    with pytest.raises(ResultsFileError, match=r"holds results of policy .* not of policy 'other'"):
        TauEvaluation(cfg.model_copy(update={"label": "other"}), progress=False)  # another policy's episodes


# -- preflight -------------------------------------------------------------------------------


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there once the socket is closed


def _tau_argv(tmp_path, model_dir, *extra: str) -> list[str]:
    return ["tau", "--domain", "retail", "--model-path", str(model_dir), "--out", str(tmp_path / "r"), "-q", *extra]


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


def test_an_unreachable_user_simulator_stops_the_run_before_any_episode(tmp_path, tiny_model_dir, capsys):
    url = _closed_port_url()
    argv = _tau_argv(tmp_path, tiny_model_dir, "--user-base-url", url, "--user-model", "u", *_overrides())
    assert cli.main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{url}/models: cannot connect" in line and "fix --user-base-url" in line
    assert not (tmp_path / "r" / "rows").exists()  # nothing built, no episode run


def test_a_policy_endpoint_without_the_model_stops_the_run(tmp_path, tiny_model_dir, capsys):
    with serve_in_thread(lambda payload, n: chat_reply("hi"), models=["other"]) as url:
        argv = _tau_argv(tmp_path, tiny_model_dir, "--base-url", url, "--model", "agent", "--user", "scripted")
        assert cli.main(argv) == 2
    line = _one_line(capsys.readouterr().err)
    assert "does not serve the model 'agent' (it serves: other); fix --model" in line


def test_a_domain_over_the_served_context_is_refused_up_front(tmp_path, tiny_model_dir, capsys):
    require_tau_bench()
    with serve_in_thread(lambda payload, n: chat_reply("hi"), models=["agent"], max_model_len=8192) as url:
        argv = _tau_argv(tmp_path, tiny_model_dir, "--base-url", url, "--model", "agent", "--user", "scripted")
        assert cli.main([*argv, *_overrides()]) == 2
    line = _one_line(capsys.readouterr().err)
    # the tiny tokenizer renders the retail prompt in 9,332 tokens
    assert re.search(
        r"τ-bench retail does not fit the model 'agent' at .*: its prompt .* is \d+ tokens, the context is 8192", line
    )
    assert not (tmp_path / "r" / "rows").exists()


def _overrides() -> list[str]:
    return [a for o in OVERRIDES for a in ("--set", o)]


@pytest.mark.parametrize(
    ("prompt", "prompt_length", "response_length", "context", "match"),
    [
        (9000, 16384, 512, 8192, "does not fit the checkpoint m: its prompt .* is 9000 tokens, the context is 8192"),
        (
            4543,
            4096,
            512,
            8192,
            "4543 tokens, over the rollout's prompt_length 4096; pass --set data.max_prompt_length=N",
        ),
        (
            4543,
            5120,
            4096,
            8192,
            "5120 \\+ response_length 4096 = 9216 tokens, over the context of the checkpoint m \\(8192\\)",
        ),
    ],
)
def test_check_fit_names_the_sizes_and_the_fix(prompt, prompt_length, response_length, context, match):
    with pytest.raises(PreflightError, match=match):
        check_fit("retail", prompt, prompt_length, response_length, context, "the checkpoint m")


def test_check_fit_passes_what_fits():
    check_fit("retail", 4543, 5120, 3072, 8192, "the checkpoint m")
    check_fit("retail", 4543, 5120, 30000, None, "an endpoint that reports no context")


def test_served_context_reads_vllms_max_model_len():
    with serve_in_thread(lambda payload, n: chat_reply("hi"), models=["a", "b"], max_model_len=4096) as url:
        assert served_context(url, "b", None) == 4096 and served_context(url, "c", None) is None
    with serve_in_thread(lambda payload, n: chat_reply("hi"), models=["a"]) as url:
        assert served_context(url, "a", None) is None


# -- report ----------------------------------------------------------------------------------


def _record(task: str, sample: int, reward: float, **extra) -> dict:
    """A results line as `eval tau` writes it."""
    fields = {
        "id": f"{task}:{sample}",
        "task": task,
        "sample": sample,
        "reward": reward,
        "policy": "p",
        "tau_reward": reward,
        "tau_r_actions": 0.0,
        "tau_r_outputs": 1.0,
        "tau_outputs_required": 0.0,
        "tau_action_f1": 0.0,
        "tau_calls": 0.0,
        "tau_turns_after_prompt": 0.0,
        "ended_by": "loop",
        "terminated_by": "max_turns",
        "elapsed_s": 1.0,
        **extra,
    }
    return tau_report.TauResult(**fields).model_dump()


def test_the_report_has_a_row_per_domain_and_a_plot(tmp_path, capsys):
    retail = [_record(f"retail/test/{i}", k, float(i == 0 or k == 0)) for i in range(2) for k in range(2)]
    airline = [
        _record("airline/test/0", 0, 0.0, tau_r_actions=1.0, tau_calls=4.0, ended_by="user_stop", elapsed_s=3.0,
                tau_turns_after_prompt=3.0),
        _record("airline/test/0", 1, 1.0, tau_r_actions=1.0, tau_calls=2.0, ended_by="transfer", elapsed_s=5.0,
                tau_turns_after_prompt=1.0),
    ]  # fmt: skip
    scores = {s.name: s for s in tau_report.summarize(tau_report.read_results(retail + airline))}
    assert scores["retail/test"].pass_hat == {1: 0.75, 2: 0.5} and scores["retail/test"].tasks == 2
    air = scores["airline/test"]
    assert (air.tasks, air.pass_hat, air.db, air.calls, air.user_turns, air.stopped, air.seconds) == (
        1,
        {1: 0.5, 2: 0.0},
        1.0,
        3.0,
        2.0,
        0.5,
        4.0,
    )
    table = tau_report.format_table(list(scores.values()), "t")
    assert (
        "| p | airline/test | 1 | 2 | 0.500 | 0.000 | 1.000 | 1.000 | 3.00 | 2.00 | 0.50 | 4.0 |" in table
        and "| p | retail/test | 2 | 2 | 0.750 | 0.500 |" in table
    )
    # tau-report reads run directories back into the same table
    for name, records in (("retail", retail), ("airline", airline)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    plot = tmp_path / "tau.png"
    argv = ["tau-report", str(tmp_path / "retail"), str(tmp_path / "airline"), "--plot", str(plot), "--title", "t"]
    assert cli.main(argv) == 0
    assert table in capsys.readouterr().out and plot.stat().st_size > 0


def test_two_policies_on_one_task_are_two_rows_not_two_samples(tmp_path, capsys):
    # bench/tau_small.py merges a base run and an SFT run of the same tasks into one table
    base = [_record(f"retail/test/{i}", 0, 0.0, policy="base") for i in range(3)]
    sft = [_record(f"retail/test/{i}", 0, float(i == 0), policy="sft", tau_calls=5.0) for i in range(3)]
    scores = tau_report.summarize(tau_report.read_results(base + sft))
    assert [(s.policy, s.name, s.tasks, s.samples) for s in scores] == [
        ("base", "retail/test", 3, 1),
        ("sft", "retail/test", 3, 1),
    ]
    assert scores[0].pass_hat == {1: 0.0} and scores[1].pass_hat == {1: pytest.approx(1 / 3)}
    assert (scores[0].calls, scores[1].calls) == (0.0, 5.0)


def test_a_record_without_a_column_is_named_not_read_as_zero(tmp_path, capsys):
    record = _record("retail/test/0", 0, 0.0)
    del record["tau_turns_after_prompt"]
    with pytest.raises(tau_report.ReportError, match=r"retail/test/0:0 .*tau_turns_after_prompt is required"):
        tau_report.read_results([record])
    old = {**_record("retail/test/0", 0, 0.0), "tau_user_turns": 2.0}  # the key before its rename
    with pytest.raises(tau_report.ReportError, match=r"unknown keys \['tau_user_turns'\]"):
        tau_report.read_results([old])
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.jsonl").write_text(json.dumps(record) + "\n")
    assert cli.main(["tau-report", str(tmp_path / "run")]) == 2
    err = _one_line(capsys.readouterr().err)
    assert "run/results.jsonl" in err and "tau_turns_after_prompt is required" in err


def test_tau_report_refuses_a_directory_without_results(tmp_path, capsys):
    assert cli.main(["tau-report", str(tmp_path)]) == 2
    assert "results.jsonl: no such file" in _one_line(capsys.readouterr().err)


def test_timeout_and_user_budget_reach_the_rows_and_the_policys_client(tmp_path, tiny_model_dir):
    """`--timeout S` serves the policy's client, `--user-timeout S` the user's (through the rows);
    `--user-max-tokens N` the user's turns."""
    require_tau_bench()
    from astra_verl.eval.envs import endpoint_server

    url = "http://127.0.0.1:9/v1"  # never asked: nothing here runs an episode
    cfg = TauEvalConfig(
        domain="retail", split="dev", out=tmp_path, model_path=str(tiny_model_dir), base_url=url, model="p",
        user_base_url=url, user_model="u", user_max_tokens=256, timeout_s=300, user_timeout_s=200, limit=1, overrides=OVERRIDES,
    )  # fmt: skip
    evaluation = TauEvaluation(cfg, progress=False)
    kwargs = evaluation.rows[0]["extra_info"]["interaction_kwargs"]
    assert (kwargs["max_tokens"], kwargs["timeout_s"]) == ("256", "200.0")
    server = endpoint_server(evaluation.env_cfg, evaluation.config)
    assert server.client.backend.timeout_s == 300
