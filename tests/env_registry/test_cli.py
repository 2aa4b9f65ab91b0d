"""`python -m env_registry`: a smoke test per subcommand, and rejected records keep file and line."""

from __future__ import annotations

import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
from testkit import REPO

from env_registry.cli import main
from env_registry.store import EnvStore


def run(capsys, *argv) -> tuple[int, str]:
    code = main([*argv])
    return code, capsys.readouterr().out


def test_help_and_schema_in_a_fresh_interpreter():
    res = subprocess.run([sys.executable, "-m", "env_registry", "--help"], capture_output=True, text=True, cwd=REPO)
    assert res.returncode == 0
    for command in ("generate", "add", "validate", "stats", "show", "export-parquet", "schema"):
        assert command in res.stdout
    res = subprocess.run([sys.executable, "-m", "env_registry", "schema"], capture_output=True, text=True, cwd=REPO)
    assert json.loads(res.stdout)["title"] == "EnvSpec"


def test_generate_validate_stats_show(tmp_path, capsys):
    store = str(tmp_path / "s")
    code, out = run(capsys, "--store", store, "-q", "generate", "--n", "24", "--seed", "2")
    assert code == 0 and "added 24" in out and "parallel_multi_hop" in out
    code, out = run(capsys, "generate", "--store", store, "-q", "--n", "24", "--seed", "2")  # options after the command
    assert code == 0 and "added 0, already in the store 24" in out
    code, out = run(capsys, "--store", store, "-q", "validate")
    assert code == 0 and "passed 24, failed 0" in out and "replayed 24, twice (determinism)" in out
    plot = tmp_path / "stats.png"
    code, out = run(capsys, "--store", store, "-q", "stats", "--plot", str(plot))
    assert code == 0 and "scenario types" in out and plot.stat().st_size > 10_000
    code, out = run(capsys, "--store", store, "-q", "stats", "--json")
    assert json.loads(out)["environments"] == 24
    env_id = EnvStore.open(store).ids()[5]
    code, out = run(capsys, "--store", store, "show", env_id[:8])
    assert code == 0 and json.loads(out)["id"] == env_id
    assert main(["--store", store, "show", "zzzzzzzz"]) == 2
    assert "matches no environment" in capsys.readouterr().err
    assert main(["--store", str(tmp_path / "missing"), "stats"]) == 2
    assert "no environment store" in capsys.readouterr().err
    assert main(["--store", store, "add", str(tmp_path / "nope.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_add_reports_and_keeps_rejected_records(tmp_path, capsys, envs):
    good = envs[:5]
    bad_hash = json.loads(envs[5].to_json()) | {"question": "edited without a new id"}
    lines = [e.to_json() for e in good] + ["", "{broken json", json.dumps(bad_hash), good[0].to_json()]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    store = str(tmp_path / "s")
    code, out = run(capsys, "--store", store, "-q", "add", str(src))
    assert code == 1
    assert "8 records: 5 added, 1 already in the store, 2 rejected" in out
    rejects = [json.loads(line) for line in (tmp_path / "in.rejects.jsonl").read_text().splitlines()]
    assert [(r["file"], r["line"], r["issues"][0]["rule"]) for r in rejects] == [
        (str(src), 7, "parse"),
        (str(src), 8, "id_hash"),
    ]
    assert rejects[1]["record"] == json.dumps(bad_hash)  # the original text, nothing lost
    code, out = run(capsys, "--store", store, "-q", "add", str(src), "--rejects", str(tmp_path / "r2.jsonl"))
    assert "0 added, 6 already in the store" in out  # a rerun adds nothing twice
    assert len(EnvStore.open(store)) == 5


def test_add_rejects_a_record_whose_golden_call_fails_replay(tmp_path, capsys, envs):
    env = next(e for e in envs if e.tools[0].golden_calls).model_copy(deep=True)
    env.tools[0].source = env.tools[0].source.replace("return", "raise ValueError('backend down')\n    return", 1)
    env = env.with_id()
    src = tmp_path / "in.jsonl"
    src.write_text(env.to_json() + "\n")
    code, out = run(capsys, "--store", str(tmp_path / "s"), "-q", "add", str(src))
    assert code == 1 and "replay_error" in out
    code, out = run(capsys, "--store", str(tmp_path / "s2"), "-q", "add", str(src), "--no-replay")
    assert code == 0 and "1 added" in out  # structure alone cannot see it


def test_export_parquet(tmp_path, capsys, store_path, tiny_model_dir):
    out_dir = tmp_path / "data"
    code, out = run(capsys, "--store", str(store_path), "-q", "export-parquet", "--out", str(out_dir))
    assert code == 0 and "exported 60 rows" in out
    train = pq.read_table(out_dir / "mix_none" / "train.parquet")
    val = pq.read_table(out_dir / "mix_none" / "val.parquet")
    assert train.num_rows + val.num_rows == 60
    code, out = run(capsys, "--store", str(store_path), "-q", "export-parquet", "--out", str(out_dir),
                    "--mixing", "random", "--tokenizer", str(tiny_model_dir), "--max-prompt-length", "700",
                    "--no-system-prompt")  # fmt: skip
    assert code == 0 and "dropped" in out and "distractors per row" in out
    dropped = (out_dir / "mix_random" / "dropped.jsonl").read_text().splitlines()
    kept = pq.read_table(out_dir / "mix_random" / "train.parquet").num_rows
    kept += pq.read_table(out_dir / "mix_random" / "val.parquet").num_rows
    assert dropped and kept + len(dropped) == 60
    assert main(["--store", str(store_path), "export-parquet", "--out", str(out_dir), "--max-prompt-length", "9"]) == 2
    assert "needs --tokenizer" in capsys.readouterr().err


def test_stats_counts_cyclic_traces_and_does_not_hide_bugs_as_cycles(tmp_path, capsys, envs, monkeypatch):
    import networkx as nx

    env = next(e for e in envs if sum(q.needs_tool for q in e.sub_questions) >= 2)
    a, b = [q for q in env.sub_questions if q.needs_tool][:2]
    cyclic = env.model_copy(deep=True)
    for q in cyclic.sub_questions:
        if q.id == a.id:
            q.depends_on = [b.id]
        elif q.id == b.id:
            q.depends_on = [a.id]
    store = tmp_path / "s"
    with EnvStore.open(store, "a") as s:
        s.add_many([env, cyclic.with_id()])
    code, out = run(capsys, "--store", str(store), "-q", "stats", "--json")
    assert code == 0 and json.loads(out)["hops"]["cyclic"] == 1

    def bug(graph):
        raise TypeError("a bug in shape_of")

    monkeypatch.setattr(nx, "dag_longest_path_length", bug)
    with pytest.raises(TypeError, match="a bug in shape_of"):
        main(["--store", str(store), "-q", "stats", "--json"])


def test_common_mistakes_end_in_one_line_and_exit_2_never_a_traceback(tmp_path, capsys, store_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("not a store")
    for argv in (["--store", str(a_file), "stats"], ["--store", str(a_file), "-q", "generate", "--n", "2"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: --store {a_file} is a file, not a store directory") and "Traceback" not in err

    # a bad --domains is refused before the store exists (it used to leave an empty store behind)
    store = tmp_path / "new_store"
    assert main(["--store", str(store), "-q", "generate", "--n", "2", "--domains", "bogus"]) == 2
    assert "unknown domain(s) ['bogus']" in capsys.readouterr().err
    assert not store.exists()
    # so is a run that would generate nothing (it used to exit 0 with an empty store)
    assert main(["--store", str(store), "-q", "generate", "--n", "0"]) == 2
    assert "ask for at least 1 environment" in capsys.readouterr().err
    assert not store.exists()

    # an output folder that cannot be created names the path and what to do
    assert main(["--store", str(store_path), "-q", "export-parquet", "--out", str(a_file / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {a_file / 'out'}") and "a part of the path is a file, not a directory" in err


def test_a_missing_input_or_tokenizer_is_named_as_missing_and_never_looked_up_on_the_hub(tmp_path, capsys, store_path):
    missing = tmp_path / "step5_merged.json"
    assert main(["--store", str(tmp_path / "s"), "-q", "import-astra", str(missing)]) == 2
    assert f"error: no such file: {missing}" in capsys.readouterr().err  # it said: not a .json file
    out = tmp_path / "out"
    assert (
        main(["--store", str(store_path), "-q", "export-parquet", "--out", str(out), "--tokenizer", "Qwen/typo"]) == 2
    )
    assert "error: --tokenizer Qwen/typo: not a directory" in capsys.readouterr().err
    assert not out.exists()


def test_interrupt_says_whether_the_command_resumes(tmp_path, capsys, monkeypatch):
    import env_registry.commands.stats as stats

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(stats, "cmd_stats", interrupted)
    assert main(["--store", str(tmp_path), "stats"]) == 130
    assert "interrupted: nothing of this run is kept; rerun the same command to start again" in capsys.readouterr().err
    import env_registry.commands.generate as generate

    monkeypatch.setattr(generate, "cmd_generate", interrupted)
    assert main(["--store", str(tmp_path), "generate", "--n", "1"]) == 130
    said = capsys.readouterr().err
    assert "the environments added so far are in the store; rerun the same command to resume" in said


def test_generate_refuses_bad_arguments_but_a_bug_while_drawing_keeps_its_traceback(tmp_path, capsys, monkeypatch):
    """No blanket `except ValueError` around the draws (#46 §3): only the arguments' checks are the user's."""
    from env_registry.families import procedural

    store = str(tmp_path / "s")
    assert main(["--store", store, "generate", "--n", "2", "--domains", "atlantis"]) == 2
    assert "generate: unknown domain(s) ['atlantis']" in capsys.readouterr().err

    def broken(*args, **kwargs):
        raise ValueError("a bug in a tool template")

    monkeypatch.setattr(procedural, "_one", broken)
    with pytest.raises(ValueError, match="a bug in a tool template"):
        main(["--store", store, "-q", "generate", "--n", "2"])
