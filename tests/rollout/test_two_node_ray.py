"""Synthesis and a rollout batch on a Ray cluster of two nodes: nothing depends on one process's
file system view.

Two `ray start` nodes run on this machine, each with its own `--temp-dir` and a custom resource
naming it (`head_node`, `worker_node`), so tasks can be forced onto the second node. On the worker
node, and in a folder only that task knows (deleted before it returns):

1. procedural environment synthesis into a store, exported as self-contained rows: the rows come
   back as values, the store never leaves the task;
2. an LLM synthesis step through `run_step_ray`, its actors pinned by resource (a scripted LLM
   backend): the driver alone writes the envelopes;
3. a rollout batch: each row's golden episode through `astra_tool_agent` (tools run in the sandbox
   from the code the row carries, scored by the row's reward target), in a task on the worker node.

Every result records the node it ran on, so a task that silently ran on the driver's node fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from testkit import ray_session

from astra_foundation.llm import LLMClient, ScriptedBackend
from data_synth.pipeline import Record, Step, StepContext, read_outputs

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.slow

ENVS = 6
RAY_START_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agent_ports() -> list[str]:
    """Free ports for one node's agents: their defaults (52365 and others) would meet any other Ray
    node on this machine, a training run's for one."""
    names = (
        "dashboard-agent-listen-port",
        "dashboard-agent-grpc-port",
        "metrics-export-port",
        "runtime-env-agent-port",
    )
    return [f"--{name}={_free_port()}" for name in names]


def _ray(*args: str, temp_dir: Path) -> None:
    cmd = [sys.executable, "-m", "ray.scripts.scripts", *args, f"--temp-dir={temp_dir}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RAY_START_TIMEOUT_S, env=_env())
    if proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )


def _env() -> dict[str, str]:
    # A token in ~/.ray makes `ray start --head` enable token auth while the joining node and the
    # driver do not send it; this throwaway cluster listens on 127.0.0.1 only, so auth is off for all.
    return {**os.environ, "RAY_AUTH_MODE": "disabled"}


def _processes() -> dict[int, tuple[int, str]]:
    """{pid: (parent pid, command line)} of every process we may read."""
    procs = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # exited meanwhile
            continue
        procs[int(proc.name)] = (ppid, cmdline)
    return procs


def _cluster_pids(root: Path, port: int) -> list[int]:
    """Processes of this cluster only (`ray stop` would stop every Ray cluster on the machine): those
    naming a session folder under `root` or the GCS address in their command lines (GCS, raylets,
    the client server), and their descendants (the agents and workers a raylet forks)."""
    procs = _processes()
    mine = {pid for pid, (_, cmd) in procs.items() if str(root) in cmd or f":{port} " in cmd + " "}
    mine.discard(os.getpid())
    grew = True
    while grew:
        children = {pid for pid, (ppid, _) in procs.items() if ppid in mine} - mine - {os.getpid()}
        mine |= children
        grew = bool(children)
    return sorted(mine)


def _stop(root: Path, port: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _cluster_pids(root, port):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 10
        while _cluster_pids(root, port) and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster():
    """A head and a worker node, separate temp dirs; torn down even when a test or a start fails."""
    root = Path(tempfile.mkdtemp(prefix="astra-ray2-"))  # short: Ray's socket paths live under it
    head_tmp, worker_tmp = root / "head", root / "worker"
    port = _free_port()
    address = f"127.0.0.1:{port}"
    common = ["--num-cpus=1", "--object-store-memory=80000000", "--disable-usage-stats"]
    client_port = _free_port()  # the default 10001 would meet any other cluster on this machine
    try:
        _ray("start", "--head", f"--port={port}", f"--ray-client-server-port={client_port}",
             "--node-ip-address=127.0.0.1", "--include-dashboard=false", '--resources={"head_node": 1}', *common,
             *_agent_ports(), temp_dir=head_tmp)  # fmt: skip
        _ray("start", f"--address={address}", "--node-ip-address=127.0.0.1", '--resources={"worker_node": 4}',
             *common, *_agent_ports(), temp_dir=worker_tmp)  # fmt: skip
        # the driver too, with Ray's in-process auth state reset: an earlier local ray.init() in this
        # process left RAY_AUTH_MODE=token behind, and the cluster then refused the driver's actors
        with ray_session("disabled", address=address, log_to_driver=False, configure_logging=False):
            # this module is not importable in the workers (importlib mode): ship it by value
            ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
            yield
    finally:
        _stop(root, port)
        assert not _cluster_pids(root, port), "Ray processes of the two-node cluster outlived the test"
        shutil.rmtree(root, ignore_errors=True)


def _node_ids() -> dict[str, str]:
    """{resource name: node id} of the two nodes."""
    ids = {}
    for node in ray.nodes():
        for name in ("head_node", "worker_node"):
            if node["Alive"] and name in node["Resources"]:
                ids[name] = node["NodeID"]
    return ids


# -- 1. procedural synthesis + self-contained export, on the worker node -------------------


def synthesize_rows(n: int, seed: int) -> dict:
    from env_registry.export import ExportConfig, export_rows
    from env_registry.families.procedural import iter_generate
    from env_registry.store import EnvStore

    folder = Path(tempfile.mkdtemp(prefix="synth-"))  # this task's own folder: no other process sees it
    try:
        with EnvStore.open(folder / "store", "a", durable=False) as store:
            store.add_many(list(iter_generate(n, seed, 2)))
        cfg = ExportConfig(val_fraction=0, rows="self-contained")
        result = export_rows(EnvStore.open(folder / "store"), config=cfg, progress=False)
        rows = json.loads(json.dumps(result.train, default=str))  # plain values travel; nothing on disk does
    finally:
        shutil.rmtree(folder)
    return {"node": ray.get_runtime_context().get_node_id(), "folder": str(folder), "rows": rows}


# -- 2. an LLM step through run_step_ray, its actors pinned to the worker node ------------------


class Topic(Record):
    n: int


class Question(Record):
    text: str
    node: str


class AskQuestion(Step[Topic, Question]):
    name = "t.ask"
    input_type = Topic
    output_type = Question

    async def process(self, record, ctx):
        reply = await ctx.llm.complete([{"role": "user", "content": f"topic={record.n}"}], step=self.name)
        return Question(key=record.key, text=reply.text, node=ray.get_runtime_context().get_node_id())


def _responder(step, payload):
    return "what is " + payload["messages"][0]["content"].split("=")[1] + "?"


async def _context():
    return StepContext(llm=LLMClient(ScriptedBackend(responder=_responder), model="m"))


# -- 3. a rollout batch: the golden episode of each row, on the worker node ---------------------


def rollout_batch(rows: list[dict], tokenizer) -> dict:
    from astra_verl.calls.call_log import EpisodeLog
    from astra_verl.eval.envs import episode_kwargs
    from astra_verl.reward.f1 import score_episode
    from astra_verl.rollout.testing import ScriptedServer, compose_trainer_config, make_loop, run
    from env_registry.answer_channel import final_message
    from env_registry.golden_sft import plan_row
    from env_registry.spec import RewardTarget

    cfg = compose_trainer_config(
        "unused-no-model-is-loaded",
        [
            "actor_rollout_ref.rollout.prompt_length=4096",
            "actor_rollout_ref.rollout.response_length=2048",
            "actor_rollout_ref.rollout.multi_turn.format=hermes",
            "+astra.sandbox.call_timeout_s=5",
        ],
    )
    rewards = []
    for row in rows:
        plan = plan_row(row, {})  # self-contained: no store is opened
        script = [
            "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"
            for name, args in plan.calls
        ] + [final_message(plan.env)]  # the answer channel: what the reward reads
        loop = make_loop(cfg, ScriptedServer(tokenizer, script), tokenizer)
        out = run(loop.run({"temperature": 1.0}, **episode_kwargs(row)))
        log = EpisodeLog.from_extra_fields(out.extra_fields)
        target = RewardTarget.model_validate_json(row["reward_model"]["ground_truth"])
        rewards.append(score_episode(log, target).reward)
    return {"node": ray.get_runtime_context().get_node_id(), "rewards": rewards}


def test_synthesis_and_rollout_run_on_the_second_node(cluster, tiny_tokenizer, tmp_path):
    from data_synth.pipeline.ray_runner import run_step_ray

    nodes = _node_ids()
    assert set(nodes) == {"head_node", "worker_node"} and nodes["head_node"] != nodes["worker_node"]
    on_worker = {"resources": {"worker_node": 1}, "num_cpus": 0}

    synth = ray.get(ray.remote(synthesize_rows).options(**on_worker).remote(ENVS, 3))
    assert synth["node"] == nodes["worker_node"]
    assert not Path(synth["folder"]).exists()  # the store is gone: the rows must carry everything
    rows = synth["rows"]
    assert len(rows) == ENVS
    assert all(json.loads(r["extra_info"]["astra"])["store"] is None for r in rows)

    topics = [Topic(key=f"t{i}", n=i) for i in range(8)]
    stats = asyncio.run(
        run_step_ray(
            AskQuestion(),
            topics,
            tmp_path / "synth",
            context_factory=_context,
            workers=2,
            batch_size=3,
            progress=False,
            num_cpus_per_worker=0,
            resources={"worker_node": 1},
        )
    )
    assert stats.ok == 8
    out = {q.key: q for q in read_outputs(tmp_path / "synth", "t.ask", Question)}
    assert {q.node for q in out.values()} == {nodes["worker_node"]}
    assert out["t5"].text == "what is 5?"

    batch = ray.get(ray.remote(rollout_batch).options(**on_worker).remote(rows, tiny_tokenizer))
    assert batch["node"] == nodes["worker_node"]
    assert batch["rewards"] == pytest.approx([1.0] * ENVS)  # every golden episode solved from its row alone
