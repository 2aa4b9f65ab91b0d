"""A user's first hour with `data_synth env` and `data_synth traj`: dry runs of both pipelines,
every bad input ends in one line and its exit status, run directories refuse to mix runs.

Exit status (astra_foundation.clikit): 0 done, 1 some record errored / an input line was unreadable /
nothing produced, 2 the command could not start. The CLIs run in-process (`main(argv)`)."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pandas as pd
import pytest

from astra_foundation.llm.fake_server import FakeReply, serve_in_thread
from data_synth.env.cli import main as env_main
from data_synth.pipeline import read_envelopes
from data_synth.traj.cli import main as traj_main

ENV_DRY = ["--responder", "data_synth.env.canned:respond", "-q"]
TRAJ_DRY = ["--responder", "data_synth.traj.canned:respond", "-q"]


def _tool(name: str, description: str, **params: str) -> dict:
    properties = {k: {"type": v} for k, v in params.items()}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(params)},
        },
    }


def write_tools(folder: Path) -> Path:
    path = folder / "shop.json"
    tools = [
        _tool("find_customer", "Look up a customer by email address", email="string"),
        _tool("list_orders", "List the orders of a customer", customer_id="string"),
        _tool("get_invoice", "Fetch the invoice of an order", order_id="string"),
        _tool("refund_order", "Refund part of an order", order_id="string", amount="number"),
    ]
    path.write_text(json.dumps(tools))
    return path


def write_domains(folder: Path, *extra_lines: str) -> Path:
    path = folder / "domains.jsonl"
    rows = [json.dumps({"domain": d, "knowledge_corpus": ""}) for d in ("travel", "weather", "retail")]
    path.write_text("\n".join([*rows, *extra_lines]) + "\n")
    return path


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _refuses_every_request(payload, n):
    return FakeReply(status=400, body={"error": {"message": "context length exceeded"}})


# -- dry runs ---------------------------------------------------------------------------------


def test_traj_dry_run_end_to_end_with_the_canned_responder(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert traj_main(["run", str(write_tools(tmp_path)), "--out", str(run_dir), *TRAJ_DRY]) == 0
    out = capsys.readouterr().out
    assert "traj.judge" in out and "export: {'rows':" in out
    rows = pd.read_parquet(run_dir / "sft.parquet")
    assert len(rows) > 0
    calls = [m for m in rows.iloc[0]["messages"] if m["role"] == "tool"]
    assert calls, "the canned agent called the tools its task was written for"
    final = rows.iloc[0]["messages"][-1]
    assert final["role"] == "assistant" and final["content"].rstrip().endswith("</answer>")  # the answer channel
    assert (run_dir / "report" / "report.md").exists() and (run_dir / "report" / "plots" / "funnel.png").exists()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["steps"]["traj.interact"]["settings"]["model"] == "data_synth.traj.canned:respond"


SPY_RESPONDER = """
from data_synth.traj import canned

ASKED = []

def respond(step, payload):
    ASKED.append(step)
    return canned.respond(step, payload)
"""


def test_the_agent_and_judge_responders_answer_their_own_steps(tmp_path, monkeypatch, capsys):
    """`--agent-responder` / `--judge-responder` answer the interact / judge steps, not the synthesis model."""
    for role in ("agent_spy", "judge_spy"):
        (tmp_path / f"{role}.py").write_text(SPY_RESPONDER)
    monkeypatch.syspath_prepend(str(tmp_path))
    run_dir = tmp_path / "run"
    roles = ["--agent-responder", "agent_spy:respond", "--judge-responder", "judge_spy:respond"]
    assert traj_main(["run", str(write_tools(tmp_path)), "--out", str(run_dir), *TRAJ_DRY, *roles]) == 0
    import agent_spy
    import judge_spy

    assert agent_spy.ASKED and set(agent_spy.ASKED) == {"traj.agent"}, set(agent_spy.ASKED)  # the agent's turns
    assert judge_spy.ASKED and set(judge_spy.ASKED) == {"traj.judge"}, set(judge_spy.ASKED)
    settings = json.loads((run_dir / "manifest.json").read_text())["steps"]
    assert settings["traj.judge"]["settings"]["model"] == "judge_spy:respond"


def test_env_dry_run_of_the_first_step_and_the_report(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["decompose", "--out", str(run_dir), "--mode", "domain", "--input", str(write_domains(tmp_path))]
    assert env_main([*argv, *ENV_DRY]) == 0
    assert "env.decompose: 3 processed (3 ok" in capsys.readouterr().out
    assert env_main(["report", "--out", str(run_dir)]) == 0
    assert (run_dir / "report" / "report.md").exists() and (run_dir / "report" / "plots" / "funnel.png").exists()


# -- fail loudly ------------------------------------------------------------------------------


def test_a_server_that_is_down_is_found_before_the_first_record(tmp_path, capsys):
    url = f"http://127.0.0.1:{_unused_port()}/v1"
    run_dir = tmp_path / "run"
    argv = ["run", "--out", str(run_dir), "--mode", "domain", "--input", str(write_domains(tmp_path))]
    assert env_main([*argv, "--base-url", url, "--model", "m", "-q"]) == 2
    assert f"error: {url}/models: cannot connect" in capsys.readouterr().err
    assert not run_dir.exists()
    assert traj_main(["run", str(write_tools(tmp_path)), "--out", str(run_dir), "--base-url", url]) == 2
    assert "cannot connect" in capsys.readouterr().err and not run_dir.exists()


def test_a_missing_model_name_is_a_usage_error_listing_the_served_models(tmp_path, capsys):
    with serve_in_thread(_refuses_every_request, models=["Qwen3-32B"]) as url:
        argv = [
            "decompose",
            "--out",
            str(tmp_path / "r"),
            "--mode",
            "domain",
            "--input",
            str(write_domains(tmp_path)),
        ]
        assert env_main([*argv, "--base-url", url]) == 2
    assert "error: --model is required; " in capsys.readouterr().err


def test_every_llm_call_failing_exits_1_with_the_first_error_on_the_console(tmp_path, capsys):
    with serve_in_thread(_refuses_every_request, models=["m"]) as url:
        llm = ["--base-url", url, "--model", "m", "--no-cache", "-q"]
        run_dir = tmp_path / "env"
        argv = ["decompose", "--out", str(run_dir), "--mode", "domain", "--input", str(write_domains(tmp_path))]
        assert env_main([*argv, *llm]) == 1
        out, err = capsys.readouterr()
        assert "env.decompose: 3 processed (0 ok, 0 rejected, 3 error)" in out
        assert "first error: record domain:" in out and "llm_unavailable" in out and "HTTP 400" in out
        assert "error: 3 records errored" in err

        run_dir = tmp_path / "traj"
        assert traj_main(["run", str(write_tools(tmp_path)), "--out", str(run_dir), *llm]) == 1
        out, err = capsys.readouterr()
        assert "first error: record " in out and "HTTP 400" in out
        assert "records errored" in err and "no trajectory was kept" in err


def test_an_env_run_that_produced_no_environment_exits_1_saying_where_to_look(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["run", "--out", str(run_dir), "--mode", "domain", "--input", str(write_domains(tmp_path)), *ENV_DRY]
    assert env_main([*argv, "--allow-scripted", "--min-quality", "2"]) == 1  # no score reaches 2
    out, err = capsys.readouterr()
    assert "env.select: 3 processed (0 ok, 3 rejected, 0 error)" in out
    assert "error: the run produced no environment; the funnel above shows where" in err


def test_empty_input_and_bad_run_dirs_end_in_one_line_and_create_nothing(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    run_dir = tmp_path / "run"
    assert env_main(["run", "--out", str(run_dir), "--mode", "domain", "--input", str(empty), *ENV_DRY]) == 2
    assert "no domain inputs; the file is empty" in capsys.readouterr().err and not run_dir.exists()
    typo = tmp_path / "typo"
    assert env_main(["report", "--out", str(typo)]) == 2
    assert env_main(["necessity", "--out", str(typo), *ENV_DRY]) == 2
    assert traj_main(["funnel", "--out", str(typo)]) == 2
    assert traj_main(["chains", "--out", str(typo)]) == 2
    err = capsys.readouterr().err
    assert err.count(f"--out {typo}") == 4 and "Traceback" not in err
    assert not typo.exists()


@pytest.mark.parametrize(
    "pipeline,extra,said",
    [
        ("traj", ["--responder", "nope"], "error: --responder must be MODULE:FUNCTION"),
        (
            "traj",
            [*TRAJ_DRY, "--judge-responder", "no_such_mod:f"],
            "error: --judge-responder no_such_mod:f: No module",
        ),
        ("traj", [*TRAJ_DRY, "--agent-extra-body", "{x"], "error: --agent-extra-body is not JSON"),
        ("env", ["--responder", "data_synth.env.canned:nothere", "-q"], "error: --responder data_synth.env"),
        ("env", ["--scripted", "missing.json", "-q"], "error: --scripted missing.json: No such file"),
    ],
)
def test_a_bad_dry_run_flag_is_a_usage_error_naming_the_flag_before_anything_is_written(
    tmp_path, capsys, pipeline, extra, said
):
    run_dir = tmp_path / "run"
    if pipeline == "traj":
        code = traj_main(["run", str(write_tools(tmp_path)), "--out", str(run_dir), *extra])
    else:
        code = env_main(["decompose", "--out", str(run_dir), "--mode", "domain", "--input", str(write_domains(tmp_path)), *extra])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and said in err and "Traceback" not in err, err
    assert not run_dir.exists()


def test_a_dry_env_run_that_could_not_publish_is_refused_before_it_runs(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["run", "--out", str(run_dir), "--mode", "domain", "--input", str(write_domains(tmp_path)), *ENV_DRY]
    assert env_main(argv) == 2
    assert "add --allow-scripted" in capsys.readouterr().err and not run_dir.exists()


def test_a_traj_run_whose_every_input_is_missing_is_a_usage_error(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert traj_main(["run", str(tmp_path / "typo.json"), "--out", str(run_dir), *TRAJ_DRY]) == 2
    assert "typo.json: no such file or folder" in capsys.readouterr().err and not run_dir.exists()


def test_a_run_directory_of_the_other_pipeline_is_refused_even_by_read_only_commands(tmp_path, capsys):
    env_dir, traj_dir = tmp_path / "env", tmp_path / "traj"
    domains = str(write_domains(tmp_path))
    assert env_main(["decompose", "--out", str(env_dir), "--mode", "domain", "--input", domains, *ENV_DRY]) == 0
    assert traj_main(["ingest", str(write_tools(tmp_path)), "--out", str(traj_dir), "-q"]) == 0
    (traj_dir / "report").mkdir()
    (traj_dir / "report" / "report.md").write_text("the traj report")
    capsys.readouterr()
    assert env_main(["report", "--out", str(traj_dir)]) == 2  # it overwrote the traj run's report
    assert traj_main(["funnel", "--out", str(env_dir)]) == 2  # it printed a funnel of zeros
    assert env_main(["necessity", "--out", str(traj_dir), *ENV_DRY]) == 2
    err = capsys.readouterr().err
    assert err.count("is a run directory of the") == 3 and "Traceback" not in err
    assert (traj_dir / "report" / "report.md").read_text() == "the traj report"


def test_a_corrupt_input_line_is_rejected_alone_and_the_exit_is_1(tmp_path, capsys):
    run_dir = tmp_path / "env"
    domains = write_domains(tmp_path, "{not json")
    argv = ["decompose", "--out", str(run_dir), "--mode", "domain", "--input", str(domains), *ENV_DRY]
    assert env_main(argv) == 1
    out, err = capsys.readouterr()
    assert "rejected input line" in out and "domains.jsonl:4: not JSON" in out
    assert "3 processed (3 ok" in out and "1 input lines were rejected" in err

    tools = tmp_path / "tools.jsonl"  # an OpenAI tool list as JSONL, one tool a line, one line broken
    tools.write_text("\n".join(json.dumps(t) for t in json.loads(write_tools(tmp_path).read_text())) + "\n{oops\n")
    run_dir = tmp_path / "traj"
    assert traj_main(["ingest", str(tools), "--out", str(run_dir), "-q"]) == 1
    out, err = capsys.readouterr()
    assert "line 5 is not JSON" in out and "could not be read" in err
    ok = [e for e in read_envelopes(run_dir, "traj.ingest").values() if e.status == "ok"]
    assert len(ok) == 1 and len(ok[0].out[0]["tools"]) == 4  # the other lines made the server


# -- run directories --------------------------------------------------------------------------


def test_a_rerun_with_other_settings_is_refused_unless_forced(tmp_path, capsys):
    run_dir = tmp_path / "run"
    domains = write_domains(tmp_path)
    base = ["decompose", "--out", str(run_dir), "--mode", "domain", "--input", str(domains), *ENV_DRY]
    assert env_main(base) == 0
    assert env_main([*base, "--limit", "2"]) == 0  # selecting records is not a setting
    before = (run_dir / "env.decompose.jsonl").read_bytes()
    capsys.readouterr()
    assert env_main([*base, "--samples", "2"]) == 2
    err = capsys.readouterr().err
    assert "was run with other settings" in err and "env.decompose: samples: 1 -> 2" in err and "--force" in err
    assert (run_dir / "env.decompose.jsonl").read_bytes() == before  # nothing was added
    assert env_main([*base, "--samples", "2", "--force"]) == 0
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["history"][0]["differences"] == ["samples: 1 -> 2"]
    assert len(read_envelopes(run_dir, "env.decompose")) == 6

    # another input file is another run too
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"domain": "music", "knowledge_corpus": ""}) + "\n")
    assert env_main([*base[:6], str(other), *base[7:], "--samples", "2"]) == 2
    assert "input_digest" in capsys.readouterr().err


def test_redo_starts_a_step_afresh_and_keeps_the_old_records(tmp_path, capsys):
    run_dir = tmp_path / "run"
    base = ["decompose", "--out", str(run_dir), "--mode", "domain", "--input", str(write_domains(tmp_path))]
    assert env_main([*base, *ENV_DRY]) == 0
    assert env_main([*base, "--samples", "2", "--redo", *ENV_DRY]) == 0
    out = capsys.readouterr().out
    assert "redo: moved 1 step files" in out and "6 processed (6 ok" in out
    (archive,) = run_dir.glob("redo-*")
    assert len((archive / "env.decompose.jsonl").read_text().splitlines()) == 3


def test_retry_rejected_reads_a_tool_doc_that_appeared_since(tmp_path, capsys):
    run_dir = tmp_path / "run"
    later = tmp_path / "later.json"
    argv = ["ingest", str(write_tools(tmp_path)), str(later), "--out", str(run_dir), "-q"]
    assert traj_main(argv) == 1  # a named input that does not exist: rejected, and said so
    assert "later.json" in capsys.readouterr().out
    later.write_text(json.dumps([_tool(n, f"the {n} operation", x="string") for n in ("a_op", "b_op", "c_op")]))
    assert traj_main([*argv, "--force"]) == 1  # a final rejection stays final on a plain rerun
    capsys.readouterr()
    assert traj_main([*argv, "--force", "--retry-rejected"]) == 0
    assert "retry: 1 rejected records will run again" in capsys.readouterr().out
    assert sorted(e.status for e in read_envelopes(run_dir, "traj.ingest").values()) == ["ok", "ok"]


def test_judges_run_at_temperature_0_unless_told_and_an_empty_folder_is_no_input(tmp_path, capsys):
    import yaml

    from data_synth.traj.cli import build_parser
    from data_synth.traj.commands import load_config

    tools = str(write_tools(tmp_path))
    run_dir = tmp_path / "t"
    assert traj_main(["ingest", tools, "--out", str(run_dir), "-q"]) == 0  # a step without a judge records 0
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["judge"]["temperature"] == 0.0
    for extra, want in (([], 0.0), (["--judge-temperature", "0.3"], 0.3)):
        args = build_parser().parse_args(["judge", "--out", str(run_dir), *extra])
        assert load_config(args).judge.temperature == want
    empty = tmp_path / "empty"
    empty.mkdir()
    assert traj_main(["ingest", str(empty), "--out", str(tmp_path / "e"), "-q"]) == 2
    assert "no tool-doc file in" in capsys.readouterr().err and not (tmp_path / "e").exists()


@pytest.mark.parametrize("argv", [["env", "run", "--help"], ["traj", "run", "--help"]])
def test_both_pipelines_speak_the_same_flags(argv, capsys):
    from data_synth.__main__ import main

    with pytest.raises(SystemExit):
        main(argv)
    text = capsys.readouterr().out
    for flag in ("-q, --quiet", "--ray [ADDRESS]", "--ray-workers", "--force", "--redo", "--retry-rejected"):
        assert flag in text, flag
