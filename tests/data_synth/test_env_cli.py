"""`python -m data_synth env run` end to end (canned replies, real sandbox), and the kill test."""

import json
import os
import signal
import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
from testkit import REPO

from data_synth.env.report import STEPS
from data_synth.pipeline import read_envelopes
from env_registry.store import EnvStore
from env_registry.validate import validate_envs

SLOW_RESPONDER = """
import time
from data_synth.env import canned

def respond(step, payload):
    time.sleep(0.003)  # blocks the loop on purpose: the run takes long enough to be killed mid-way
    return canned.respond(step, payload)
"""


HOLD_STORE = """
import sys, time
from env_registry.store import EnvStore
store = EnvStore.open(sys.argv[1], "a")
print("held", flush=True)
time.sleep(600)
"""


def _cmd(run_dir, responder, *extra, allow_scripted=True):
    return [
        sys.executable, "-m", "data_synth", "env", "run", "--out", str(run_dir), "--mode", "domain",
        "--bundled-input", "--responder", responder, "--percentile", "0", "--quiet", "--sandbox-workers", "1",
        *(["--allow-scripted"] if allow_scripted else []), *extra,
    ]  # fmt: skip


def test_dry_run_end_to_end(tmp_path):
    """The bundled sample domains through every step with canned replies; what a dry run makes is
    marked scripted and goes into a store only with --allow-scripted."""
    run_dir = tmp_path / "run"
    dry = _cmd(run_dir, "data_synth.env.canned:respond", "--limit", "8", "--model", "Qwen3-32B", allow_scripted=False)
    refused = subprocess.run(dry, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert refused.returncode == 2 and "add --allow-scripted" in refused.stderr, refused.stderr[-3000:]
    assert "(data_synth.env.canned:respond answers, not a model)" in refused.stderr
    assert not run_dir.exists()  # refused before the first step, not after the last
    r = subprocess.run([*dry, "--allow-scripted"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "env.publish" in r.stdout
    publish = [sys.executable, "-m", "data_synth", "env", "publish", "--out", str(run_dir)]
    refused = subprocess.run(publish, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert refused.returncode == 2 and "data_synth.env.canned:respond answered, not a model" in refused.stderr
    # A store held by another writer: one line naming the store and the holder, exit 2, no traceback.
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_STORE, str(run_dir / "envs")], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        locked = subprocess.run([*publish, "--allow-scripted"], capture_output=True, text=True, cwd=REPO, timeout=300)
    finally:
        holder.kill()
        holder.wait()
    assert locked.returncode == 2 and "Traceback" not in locked.stderr, locked.stderr[-3000:]
    assert f"{run_dir / 'envs'} is open for writing by pid {holder.pid}" in locked.stderr, locked.stderr
    with EnvStore.open(run_dir / "envs") as store:
        envs = list(store)
        assert len(envs) == 8
        assert {(e.provenance.model, e.provenance.scripted) for e in envs} == {(None, "data_synth.env.canned:respond")}
        report = validate_envs(envs, progress=False)  # structure + golden replay in the sandbox, twice
        assert report.ok and report.replayed == 8 and report.determinism, report.by_rule()
    rows = pq.read_table(run_dir / "parquet/mix_none/train.parquet").num_rows
    rows += pq.read_table(run_dir / "parquet/mix_none/val.parquet").num_rows
    assert rows == 8
    r = subprocess.run(
        [sys.executable, "-m", "data_synth", "env", "report", "--out", str(run_dir)],
        capture_output=True, text=True, cwd=REPO, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0 and "report:" in r.stdout, r.stderr[-3000:]
    assert (run_dir / "report" / "report.md").exists()
    for name in ("funnel.png", "hops.png", "scenario_types.png", "tools.png", "quality.png"):
        assert (run_dir / "report" / "plots" / name).exists(), name
    funnel = json.loads((run_dir / "funnel.json").read_text())
    assert [s["step"] for s in funnel["steps"]] == STEPS and funnel["steps"][0]["inputs"] == 8


def test_bad_arguments_say_what_is_wrong(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "data_synth", "env", "decompose", "--out", str(tmp_path), "--mode", "context",
         "--input", str(tmp_path / "missing.jsonl"), "--responder", "data_synth.env.canned:respond"],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert r.returncode == 2 and "does not exist" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "data_synth", "env", "necessity", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=REPO, timeout=120,
    )  # fmt: skip
    assert r.returncode != 0 and "--base-url" in (r.stderr + r.stdout)


def _snapshot(run_dir):
    envs = {step: {k: (e.status, e.reason) for k, e in read_envelopes(run_dir, step).items()} for step in STEPS}
    with EnvStore.open(run_dir / "envs") as store:
        ids = store.ids()
    return envs, ids


@pytest.mark.slow
def test_sigkill_mid_pipeline_then_rerun_equals_uninterrupted(tmp_path):
    (tmp_path / "slow_canned.py").write_text(SLOW_RESPONDER)
    env = {**os.environ, "PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    cmd = _cmd(killed, "slow_canned:respond", "--samples", "4")  # 12 sample domains x 4 scenario types
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tools_file = killed / "env.tools.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if tools_file.exists() and tools_file.read_bytes().count(b"\n") >= 15:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    at_kill = tools_file.read_bytes().count(b"\n")
    assert 15 <= at_kill < 48 and not (killed / "env.publish.jsonl").exists(), "the kill must land mid-run"

    for run_dir in (killed, whole):
        r = subprocess.run(_cmd(run_dir, "slow_canned:respond", "--samples", "4"), cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stderr[-3000:]
    resumed, uninterrupted = _snapshot(killed), _snapshot(whole)
    assert resumed == uninterrupted
    steps, ids = resumed
    assert len(ids) == len(set(ids)) == 48 and len(steps["env.publish"]) == 48
    for step in STEPS:  # nothing processed twice: one line per key in every step file
        keys = [json.loads(line)["key"] for line in (killed / f"{step}.jsonl").read_text().splitlines()]
        assert len(keys) == len(set(keys)), step
