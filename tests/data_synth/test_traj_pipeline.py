"""The whole trajectory pipeline with a deterministic scripted LLM: every step, the funnel, the
export; kill -9 mid-run and rerun loses and duplicates nothing; the CLI.

`FakeLLM` answers every step from the prompt alone (never from call order), so concurrent
and resumed runs get the same answers. Chains travel through the task queries as a rot13 code
("job ..."), which the fake agent decodes to know which tools to call, so a query never names
a tool and the back-translation can reproduce the chain.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd

from data_synth.pipeline import read_envelopes, step_files
from data_synth.traj.config import TrajConfig
from data_synth.traj.judge import DIMENSIONS as DIMS
from data_synth.traj.run import STEP_ORDER, ContextFactory, Runner

HERE = Path(__file__).resolve()


def astra_server(name: str, tools: list[str]) -> dict:
    return {
        "base_info": {
            "group_info": {
                "server_title": name.title(),
                "server_name": name,
                "server_description": f"The {name} service.",
                "domain": "test",
            },
            "tool_list": [
                {
                    "name": t,
                    "description": f"{t.replace('_', ' ')} of a customer",
                    "parameters": {
                        "type": "object",
                        "properties": {"customer_id": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                        "required": ["customer_id"] if i else [],
                    },
                }
                for i, t in enumerate(tools)
            ],
        }
    }


SERVERS = [
    astra_server("crm", ["find_customer", "get_orders", "get_invoice", "refund_order", "send_email"]),
    astra_server("helpdesk", ["open_ticket", "assign_ticket", "close_ticket", "notify_user"]),
]


def write_inputs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "servers.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in SERVERS))
    return path


def _names(text: str) -> list[str]:
    return re.findall(r"^- ([A-Za-z0-9_-]+): ", text, re.MULTILINE)


def encode(tools: list[str]) -> str:
    return codecs.encode("+".join(tools), "rot13")


def decode(text: str) -> list[str]:
    m = re.search(r"job ([a-z_+-]+)", text)
    return codecs.decode(m.group(1), "rot13").split("+") if m else []


def _args(schema: dict) -> dict:
    out = {}
    for name in schema.get("required", []):
        t = schema["properties"][name].get("type")
        out[name] = {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}.get(t, "c-42")
    return out


class FakeLLM:
    """A deterministic stand-in model for every step (see the module doc)."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s

    def __call__(self, step: str, payload: dict):
        if self.delay_s:
            time.sleep(self.delay_s)
        text = payload["messages"][-1]["content"] if payload["messages"] else ""
        handler = getattr(self, step.replace("traj.", "_"), None)
        if handler is None:
            raise AssertionError(f"FakeLLM: no answer for step {step}")
        out = handler(text, payload)
        return out if isinstance(out, dict) and ("tool_calls" in out or "content" in out) else json.dumps(out)

    def _propose(self, text, payload):
        n = _names(text)
        chains = [n[0:3], n[1:3], n[2:5], [n[0], "ghost_tool"]]
        return {"chains": [{"tools": c, "confidence": 0.9, "reason": "data flows"} for c in chains if len(c) >= 2]}

    def _vote(self, text, payload):
        return {"coherent": len(_names(text)) < 4, "reason": "short chains are coherent here"}

    def _backtranslate_query(self, text, payload):
        return {"query": f"Please carry out job {encode(_names(text))} for my account today."}

    def _backtranslate_chain(self, text, payload):
        return {"tools": decode(text)}

    def _task_chain(self, text, payload):
        tools = re.findall(r'^\{"name": "([^"]+)"', text, re.MULTILINE)
        return {"queries": [f"Kindly handle job {encode(tools)} for customer c-42 now."]}

    def _task_server(self, text, payload):
        n = _names(text)
        return {"tasks": [{"query": f"Please run job {encode(n[:1])} for customer c-42.", "tools": n[:1]}]}

    def _augment(self, mode, text):
        original = re.search(r"^Original request: (.*)$", text, re.MULTILINE).group(1)
        return {"query": f"{original} This is the {mode} version."}

    def _augment_diverse(self, text, payload):
        return self._augment("diverse", text)

    def _augment_complicate(self, text, payload):
        return self._augment("complicate", text)

    def _augment_persona(self, text, payload):
        return self._augment("persona", text)

    def _task_score(self, text, payload):
        necessity = 3 if "complicate version" in text else 5  # complicated variants fail the threshold
        return {"question_quality": 4, "scenario_realism": 4, "tool_necessity": necessity, "reason": "ok"}

    def _simulate(self, text, payload):
        if "This call fails" in text:
            return {"status": "error", "result": "service temporarily unavailable"}
        call = re.search(r"^Call: (.*)$", text, re.MULTILINE).group(1)
        return {"status": "ok", "result": {"done": call}}

    def _agent(self, text, payload):
        messages = payload["messages"]
        user = next(m["content"] for m in messages if m["role"] == "user")
        plan = decode(user)
        done = sum(1 for m in messages if m["role"] == "tool")
        if done < len(plan):
            schemas = {t["function"]["name"]: t["function"]["parameters"] for t in payload["tools"]}
            return {"content": "", "tool_calls": [{"name": plan[done], "arguments": _args(schemas[plan[done]])}]}
        return {"content": f"Finished {done} steps; the last result was {messages[-1]['content'][:60]}"}

    def _judge(self, text, payload):
        value = 0.3 if "unavailable" in text else 0.9  # trajectories that met a failure score low here
        return {"scores": {d: value for d in DIMS}, "reason": "fake"}


def config() -> TrajConfig:
    return TrajConfig.from_dict(
        {
            "ingest": {"min_tools": 3},
            "chains": {"per_start": 2, "seed": 3},
            "verify": {"votes": 3},
            "tasks": {"per_chain": 1, "per_server": 1},
            "interact": {"failure_rate": 0.2},
            "judge": {"threshold": 0.7},
            "concurrency": 8,
        }
    )


def run_pipeline(run_dir: Path, inputs: Path, delay_s: float = 0.0) -> dict:
    factory = ContextFactory(run_dir=str(run_dir), responders={"llm": FakeLLM(delay_s)})
    runner = Runner(run_dir, config(), factory, progress=False)

    async def go():
        try:
            return (await runner.run_all([str(inputs)]))[1]
        finally:
            await runner.aclose()

    return asyncio.run(go())


def outcomes(run_dir: Path) -> dict[str, dict[str, tuple]]:
    """Per step: key -> (status, reason, outputs) of the final envelope (meta left out)."""
    return {
        step: {
            k: (e.status, e.reason, json.dumps(e.out, sort_keys=True)) for k, e in read_envelopes(run_dir, step).items()
        }
        for step in STEP_ORDER
    }


def test_pipeline_end_to_end_with_funnel_and_export(tmp_path):
    inputs = write_inputs(tmp_path / "in")
    run_dir = tmp_path / "run"
    summary = run_pipeline(run_dir, inputs)
    funnel = {c.step: c for c in Runner(run_dir, config(), ContextFactory(str(run_dir))).funnel().steps}
    assert funnel["traj.ingest"].ok == 2
    assert funnel["traj.graph"].ok == 2
    chains = funnel["traj.chains"].outputs
    assert chains > 4
    assert funnel["traj.verify"].rejection_reasons.get("vote", 0) > 0  # 4+ tool chains are voted down
    assert funnel["traj.verify"].ok + funnel["traj.verify"].rejected == chains
    assert funnel["traj.score"].rejection_reasons == {"below_task_threshold": funnel["traj.augment"].outputs // 3}
    assert funnel["traj.judge"].rejection_reasons.get("below_judge_threshold", 0) > 0  # injected failures
    assert all(c.error == 0 for c in funnel.values())
    # The hallucinated proposal was dropped with its reason, not turned into an edge.
    graph = read_envelopes(run_dir, "traj.graph")["crm"].out[0]
    assert any("ghost_tool" in d["reason"] for d in graph["dropped_proposals"])
    assert all("ghost_tool" not in (e["source"], e["target"]) for e in graph["edges"])

    df = pd.read_parquet(run_dir / "sft.parquet")
    assert len(df) == summary["rows"] == funnel["traj.judge"].ok > 0
    row = df.iloc[0]
    roles = [m["role"] for m in row["messages"]]
    assert roles[:2] == ["system", "user"] and "tool" in roles and roles[-1] == "assistant"
    assert "<answer>...</answer>" in row["messages"][0]["content"]  # the agent is told the answer channel
    assert {t["function"]["name"] for t in json.loads(row["tools"])} <= {
        t["name"] for s in SERVERS for t in s["base_info"]["tool_list"]
    }
    lines = (run_dir / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == funnel["traj.interact"].ok
    assert {json.loads(x)["judge_status"] for x in lines} == {"ok", "rejected"}
    report = (run_dir / "report" / "report.md").read_text()
    assert "| traj.judge |" in report and "## Kept trajectories" in report
    for png in ("funnel", "rejections", "judge_scores", "judge_dimensions", "tool_calls", "chain_lengths"):
        assert (run_dir / "report" / "plots" / f"{png}.png").stat().st_size > 1000 and f"(plots/{png}.png)" in report
    assert json.loads((run_dir / "funnel.json").read_text())["steps"][0]["step"] == "traj.ingest"


CHILD = """
import sys
sys.path.insert(0, {here!r})
import importlib.util
spec = importlib.util.spec_from_file_location("pipe", {file!r})
pipe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pipe)
from pathlib import Path
pipe.run_pipeline(Path({run_dir!r}), Path({inputs!r}), delay_s={delay})
print("DONE")
"""


def _child(run_dir: Path, inputs: Path, delay: float) -> subprocess.Popen:
    code = CHILD.format(here=str(HERE.parent), file=str(HERE), run_dir=str(run_dir), inputs=str(inputs), delay=delay)
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none"},
    )


def test_kill_and_rerun_loses_and_duplicates_nothing(tmp_path):
    inputs = write_inputs(tmp_path / "in")
    reference = tmp_path / "reference"
    run_pipeline(reference, inputs)

    resumed = tmp_path / "resumed"
    proc = _child(resumed, inputs, delay=0.01)
    deadline = time.monotonic() + 60
    # Kill once the interaction step has written some, but not all, of its records.
    while time.monotonic() < deadline and proc.poll() is None:
        files = step_files(resumed, "traj.interact")
        if files and sum(1 for _ in open(files[0])) >= 5:
            break
        time.sleep(0.05)
    assert proc.poll() is None, f"the child finished before it could be killed: {proc.communicate()}"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    partial = sum(1 for _ in open(step_files(resumed, "traj.interact")[0]))
    assert 5 <= partial < len(read_envelopes(reference, "traj.interact"))

    proc = _child(resumed, inputs, delay=0.0)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "DONE" in out, err[-2000:]

    assert outcomes(resumed) == outcomes(reference)
    for step in STEP_ORDER:  # no key written twice as final
        finals = Counter()
        for path in step_files(resumed, step):
            for line in path.read_text().splitlines():
                env = json.loads(line)
                if env["status"] != "error":
                    finals[env["key"]] += 1
        assert not [k for k, n in finals.items() if n > 1], step
    a = pd.read_parquet(reference / "sft.parquet")
    b = pd.read_parquet(resumed / "sft.parquet")
    assert a["task_id"].tolist() == b["task_id"].tolist()
    assert (
        a["messages"].apply(json.dumps, default=list).tolist() == b["messages"].apply(json.dumps, default=list).tolist()
    )


def test_cli_help_and_schema_only_graph(tmp_path):
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "none"}
    help_ = subprocess.run(
        [sys.executable, "-m", "data_synth", "traj", "--help"], capture_output=True, text=True, env=env
    )
    assert help_.returncode == 0 and "back-translation" in help_.stdout and "--plot SERVER" in help_.stdout
    inputs = write_inputs(tmp_path / "in")
    run_dir = tmp_path / "run"
    base = [sys.executable, "-m", "data_synth", "traj"]
    r = subprocess.run(
        [*base, "ingest", str(inputs), "--out", str(run_dir), "-q"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    r = subprocess.run(
        [
            *base,
            "graph",
            "--out",
            str(run_dir),
            "--set",
            "propose.samples=0",
            "--set",
            "graph.compat_min=0.2",
            "--plot",
            "crm",
            "--plot",
            "nope",
            "-q",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert r.returncode == 0, r.stderr
    assert (run_dir / "graphs" / "crm.png").exists() and (run_dir / "graphs.graphml").exists()
    assert "no graph for that server" in r.stdout
    r = subprocess.run([*base, "verify", "--out", str(run_dir)], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "needs an LLM" in r.stderr
    r = subprocess.run(
        [*base, "chains", "--out", str(run_dir), "--set", "chains.bogus=1"], capture_output=True, text=True, env=env
    )
    assert r.returncode != 0 and "unknown keys ['bogus']" in r.stderr
