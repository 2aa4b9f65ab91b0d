"""The step runner: statuses, resume, shards, torn lines, the kill test, and the Ray path."""

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from testkit import ray_session

from astra_foundation.llm import LLMClient, ScriptedBackend
from data_synth.pipeline import (
    Appender,
    Envelope,
    Funnel,
    Record,
    Reject,
    RunDirError,
    Shard,
    Step,
    StepContext,
    read_envelopes,
    read_outputs,
    run_chain,
    run_step,
    step_file,
)


class Item(Record):
    n: int


class Doubled(Record):
    VERSION = 2
    value: int
    said: str


class Double(Step[Item, Doubled]):
    name = "t.double"
    input_type = Item
    output_type = Doubled

    def __init__(self, fail_on=(), reject_multiple_of=7):
        self.fail_on = set(fail_on)
        self.reject_multiple_of = reject_multiple_of

    async def process(self, record, ctx):
        if record.n in self.fail_on:
            raise RuntimeError(f"boom on {record.n}")
        if record.n % self.reject_multiple_of == 0:
            raise Reject("multiple_of_7", f"{record.n}")
        reply = await ctx.llm.complete_json([{"role": "user", "content": f"n={record.n}"}], step=self.name)
        return Doubled(key=record.key, value=reply.value["double"], said=reply.completion.text)


def _responder(step, payload):
    n = int(payload["messages"][0]["content"].split("=")[1])  # [0]: a repair round appends turns
    if n == 13:
        return "not json at all"  # twice (repair round too): rejected with the parse reason
    return json.dumps({"double": 2 * n})


def _ctx():
    return StepContext(llm=LLMClient(ScriptedBackend(responder=_responder), model="m"))


def _items(k):
    return [Item(key=f"item-{i:03d}", n=i) for i in range(1, k + 1)]


@pytest.mark.asyncio
async def test_statuses_resume_and_funnel(tmp_path):
    stats = await run_step(Double(fail_on={5}), _items(20), tmp_path, ctx=_ctx(), concurrency=4, progress=False)
    assert (stats.ok, stats.rejected, stats.error) == (16, 3, 1)
    envs = read_envelopes(tmp_path, "t.double")
    assert envs["item-007"].reason == "multiple_of_7"
    assert envs["item-013"].status == "rejected" and envs["item-013"].reason == "t.double:no_json"
    assert envs["item-005"].status == "error" and "boom on 5" in envs["item-005"].detail
    assert envs["item-002"].meta["usage"]["completions"] == 1 and envs["item-002"].record_version == 2

    # rerun: finished records are skipped, the error is retried (and now succeeds)
    again = await run_step(Double(), _items(20), tmp_path, ctx=_ctx(), progress=False)
    assert (again.skipped_done, again.ok, again.processed) == (19, 1, 1)
    out = read_outputs(tmp_path, "t.double", Doubled)
    assert [o.value for o in out] == [2 * i for i in range(1, 21) if i % 7 and i != 13]

    funnel = Funnel.from_run(tmp_path, ["t.double"], first_inputs=20)
    step = funnel.steps[0]
    assert (step.inputs, step.ok, step.rejected, step.error, step.pending) == (20, 17, 3, 0, 0)
    assert step.rejection_reasons == {"multiple_of_7": 2, "t.double:no_json": 1}
    assert "multiple_of_7" in funnel.table()


@pytest.mark.asyncio
async def test_shards_split_and_merge_without_duplicates(tmp_path):
    items = _items(30)
    for i in range(3):
        await run_step(Double(), items, tmp_path / "sharded", ctx=_ctx(), shard=Shard(i, 3), progress=False)
    await run_step(Double(), items, tmp_path / "whole", ctx=_ctx(), progress=False)
    files = sorted(p.name for p in (tmp_path / "sharded").iterdir())
    assert files == [f"t.double.shard-{i}-of-3.jsonl" for i in range(3)]
    sizes = [len((tmp_path / "sharded" / f).read_text().splitlines()) for f in files]
    assert sum(sizes) == 30 and all(s > 0 for s in sizes)
    assert read_outputs(tmp_path / "sharded", "t.double", Doubled) == read_outputs(
        tmp_path / "whole", "t.double", Doubled
    )
    with pytest.raises(ValueError, match="I/N"):
        Shard.parse("3")


def test_torn_last_line_is_skipped_then_cut(tmp_path):
    path = step_file(tmp_path, "s")
    with Appender(path) as out:
        out.append(Envelope(step="s", key="a", status="ok", out=[{"key": "a"}]))
    with open(path, "ab") as f:
        f.write(b'{"v": 1, "step": "s", "key": "b", "sta')  # a write killed halfway
    assert list(read_envelopes(tmp_path, "s")) == ["a"]
    with Appender(path) as out:  # the next writer cuts the torn line before appending
        out.append(Envelope(step="s", key="c", status="ok", out=[{"key": "c"}]))
    assert list(read_envelopes(tmp_path, "s")) == ["a", "c"]
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_corrupt_middle_line_names_file_and_line(tmp_path):
    path = step_file(tmp_path, "s")
    path.write_text(
        '{"v": 1, "step": "s", "key": "a", "status": "ok"}\ngarbage\n{"v": 1, "step": "s", "key": "b", "status": "ok"}\n'
    )
    with pytest.raises(RunDirError, match=r"s\.jsonl:2"):
        read_envelopes(tmp_path, "s")


def test_final_envelope_wins_over_error_and_duplicates(tmp_path):
    with Appender(step_file(tmp_path, "s")) as out:
        out.append(Envelope(step="s", key="a", status="error", reason="llm_unavailable"))
        out.append(Envelope(step="s", key="a", status="ok", out=[{"key": "a"}]))
        out.append(Envelope(step="s", key="a", status="rejected", reason="late duplicate"))
    assert read_envelopes(tmp_path, "s")["a"].status == "ok"


class Split(Step[Doubled, Item]):
    """Fan-out: one input, two outputs with their own keys."""

    name = "t.split"
    input_type = Doubled
    output_type = Item

    def __init__(self, fail=False):
        self.fail = fail

    async def process(self, record, ctx):
        if self.fail and record.value % 4 == 0:
            raise RuntimeError("flaky")
        return [Item(key=f"{record.key}/a", n=record.value), Item(key=f"{record.key}/b", n=-record.value)]


@pytest.mark.asyncio
async def test_chain_streams_records_and_resumes_mid_chain(tmp_path):
    items = _items(12)
    stats = await run_chain([Double(), Split(fail=True)], items, tmp_path, ctx=_ctx(), concurrency=3, progress=False)
    assert [(s.ok, s.rejected, s.error) for s in stats] == [(11, 1, 0), (5, 0, 6)]
    backend = ScriptedBackend(responder=_responder)
    ctx = StepContext(llm=LLMClient(backend, model="m"))
    again = await run_chain([Double(), Split()], items, tmp_path, ctx=ctx, progress=False)
    assert again[0].skipped_done == 12 and again[1].ok == 6 and again[1].skipped_done == 5
    assert backend.requests == []  # step 1 was finished: resuming at step 2 asks the model nothing
    split = read_outputs(tmp_path, "t.split", Item)
    assert len(split) == 22 and {i.key for i in split} >= {"item-002/a", "item-002/b"}
    with pytest.raises(TypeError, match="writes Doubled but t.double reads Item"):
        await run_chain([Double(), Double()], items, tmp_path, ctx=ctx)


KILL_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from astra_foundation.llm import LLMClient, ResponseCache, ScriptedBackend
    from data_synth.pipeline import Record, Reject, Step, StepContext, run_step

    class Item(Record):
        n: int

    class Out(Record):
        value: int

    class Slow(Step):
        name = "k.slow"
        input_type = Item
        output_type = Out

        async def process(self, record, ctx):
            await asyncio.sleep(0.01)
            if record.n % 5 == 0:
                raise Reject("five", str(record.n))
            r = await ctx.llm.complete_json([{"role": "user", "content": str(record.n)}], step=self.name)
            return [Out(key=record.key, value=r.value["v"]), Out(key=record.key + "/b", value=-r.value["v"])]

    def responder(step, payload):
        return json.dumps({"v": int(payload["messages"][-1]["content"]) * 3})

    async def main(run_dir):
        llm = LLMClient(ScriptedBackend(responder=responder), model="m", cache=ResponseCache(run_dir + "/cache.sqlite"))
        items = [Item(key=f"r{i:04d}", n=i) for i in range(400)]
        await run_step(Slow(), items, run_dir, ctx=StepContext(llm=llm), concurrency=8, progress=False)
        await llm.aclose()

    asyncio.run(main(sys.argv[1]))
    """
)


def test_sigkill_mid_run_loses_and_duplicates_nothing(tmp_path):
    script = tmp_path / "kill_me.py"
    script.write_text(KILL_SCRIPT)
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    killed.mkdir()
    whole.mkdir()
    out_file = killed / "k.slow.jsonl"
    proc = subprocess.Popen([sys.executable, str(script), str(killed)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if out_file.exists() and out_file.read_bytes().count(b"\n") >= 40:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    lines_at_kill = out_file.read_bytes().count(b"\n")
    assert 40 <= lines_at_kill < 400, "the kill should land mid-run"
    subprocess.run([sys.executable, str(script), str(killed)], check=True, timeout=120)
    subprocess.run([sys.executable, str(script), str(whole)], check=True, timeout=120)

    def content(run_dir):
        envs = read_envelopes(run_dir, "k.slow")
        return {k: (e.status, e.reason, e.out) for k, e in envs.items()}

    resumed, uninterrupted = content(killed), content(whole)
    assert resumed == uninterrupted and len(resumed) == 400
    keys = [json.loads(line)["key"] for line in out_file.read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 400  # nothing processed twice, not even on disk


async def _ray_context():
    # runs inside the Ray worker process: it builds its own client
    return StepContext(llm=LLMClient(ScriptedBackend(responder=_responder), model="m"))


def test_ray_runner_matches_local(tmp_path):
    ray = pytest.importorskip("ray")
    from data_synth.pipeline.ray_runner import run_step_ray

    # this test module is not importable in the worker (importlib mode): ship it by value
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with ray_session(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False):
        items = _items(40)
        stats = asyncio.run(
            run_step_ray(
                Double(fail_on={9}),
                items,
                tmp_path / "ray",
                context_factory=_ray_context,
                workers=2,
                batch_size=6,
                progress=False,
            )
        )
        assert (stats.ok, stats.rejected, stats.error) == (33, 6, 1)
        rerun = asyncio.run(
            run_step_ray(Double(), items, tmp_path / "ray", context_factory=_ray_context, workers=2, progress=False)
        )
        assert (rerun.skipped_done, rerun.processed) == (39, 1)
    asyncio.run(run_step(Double(), items, tmp_path / "local", ctx=_ctx(), progress=False))
    assert read_outputs(tmp_path / "ray", "t.double", Doubled) == read_outputs(tmp_path / "local", "t.double", Doubled)
