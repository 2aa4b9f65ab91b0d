"""`python -m astra_verl.eval bfcl` fails loudly before the first entry, and Ctrl-C stops it cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from types import SimpleNamespace

import pytest

from astra_foundation.llm.fake_server import FakeReply, chat_reply, serve_in_thread
from astra_verl.eval import cli
from astra_verl.eval.bfcl_run import evaluate, results_file


def test_a_model_the_server_does_not_serve_stops_before_any_entry(tmp_path, capsys):
    with serve_in_thread(lambda payload, n: chat_reply("hi"), models=["qwen"]) as url:
        argv = [
            "bfcl",
            "--base-url",
            url,
            "--model",
            "Qwen",
            "--ids",
            "multi_turn_base_0",
            "--out",
            str(tmp_path / "r"),
        ]
        assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "does not serve the model 'Qwen' (it serves: qwen); fix --model" in err
    assert not (tmp_path / "r").exists()


def test_eval_envs_refuses_bad_paths_and_settings_with_exit_2_before_loading_anything(tmp_path, capsys):
    data, model = tmp_path / "val.parquet", tmp_path / "ckpt"
    base = ["envs", "--out", str(tmp_path / "out")]
    assert cli.main([*base, "--data", str(data), "--model-path", str(model)]) == 2
    assert f"error: --data {data}: no such file; pass an `env_registry export-parquet` file" in capsys.readouterr().err
    data.write_bytes(b"")
    assert cli.main([*base, "--data", str(data), "--model-path", "Qwen/typo"]) == 2  # never tried on the hub
    assert "error: --model-path Qwen/typo: not a directory" in capsys.readouterr().err
    model.mkdir()
    assert cli.main([*base, "--data", str(data), "--model-path", str(model), "--n", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: eval envs: ") and "temperature" in err, err
    assert not (tmp_path / "out").exists()


def test_bfcl_ids_and_results_that_do_not_exist_are_named_with_exit_2(tmp_path, capsys):
    assert cli.main(["bfcl-replay", "--ids", "multi_turn_base_9999"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no BFCL multi-turn entries ['multi_turn_base_9999']") and "Traceback" not in err
    assert cli.main(["bfcl-score", str(tmp_path / "results.jsonl")]) == 2
    assert f"error: {tmp_path / 'results.jsonl'}: no such file" in capsys.readouterr().err


def _as_a_foreground_job() -> None:
    """A shell starts background jobs (`pytest ... &`) with SIGINT ignored and children inherit
    that; Python then installs no KeyboardInterrupt handler and the Ctrl-C below would be lost."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_cleanly_and_says_how_to_resume(tmp_path):
    asked = threading.Event()

    def slow(payload, n):
        asked.set()
        return FakeReply(body=chat_reply("late").body, delay_s=120)

    with serve_in_thread(slow, models=["m"]) as url:
        out = tmp_path / "run"
        argv = ["bfcl", "--base-url", url, "--model", "m", "--ids", "multi_turn_base_0,multi_turn_base_1"]
        err_file = tmp_path / "stderr.txt"
        with open(err_file, "w") as err_out:  # a file, not a pipe: a grandchild holding it cannot stall the read
            proc = subprocess.Popen(
                [sys.executable, "-m", "astra_verl.eval", *argv, "--out", str(out), "--sandbox-workers", "1", "-q"],
                stdout=subprocess.DEVNULL,
                stderr=err_out,
                cwd=tmp_path,
                start_new_session=True,  # its own process group, as a terminal's foreground job
                preexec_fn=_as_a_foreground_job,
            )
            try:
                assert asked.wait(240), err_file.read_text()[-3000:]
                os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends: to the whole group
                try:
                    proc.wait(timeout=180)
                except subprocess.TimeoutExpired:
                    pytest.fail(f"still running 180 s after Ctrl-C; its stderr:\n{err_file.read_text()[-3000:]}")
            finally:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
    err = err_file.read_text()
    assert proc.returncode == 130, err[-3000:]
    assert f"interrupted: scored entries are saved in {out / 'results.jsonl'}; rerun the same command" in err
    for noise in ("Traceback", "never retrieved", "died"):
        assert noise not in err, err[-3000:]


@pytest.mark.asyncio
async def test_cancelling_an_evaluation_stops_every_episode_before_it_returns(tmp_path):
    """Ctrl-C cancels `evaluate`; its episodes must be stopped (and their outcomes read) before the
    caller closes the sandbox and the client, or they fail against a closed pool, unread."""
    started = asyncio.Event()

    async def episode(i):
        started.set()
        await asyncio.sleep(60)

    data = SimpleNamespace(entries=[SimpleNamespace(id=f"e{i}") for i in range(3)], targets=[None] * 3)
    results = results_file(tmp_path / "results.jsonl", "m")
    task = asyncio.create_task(evaluate(data, episode, None, results, model="m", concurrency=3, progress=False))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
