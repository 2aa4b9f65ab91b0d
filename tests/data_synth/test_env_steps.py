"""Every environment step on the scripted backend, with malformed model output injected.

Each case runs one seed through the real steps (decompose -> ... -> merge, real sandbox),
replacing the canned reply of one step; the record must end rejected (or errored) with the
stated reason and the run must go on. The canned replies themselves must produce an
environment that `env_registry` validates, golden calls replayed.
"""

import ast
import json
import re

import pytest
import pytest_asyncio

from astra_foundation.llm import LLMClient, ScriptedBackend
from astra_foundation.sandbox import SandboxConfig, SandboxPool
from data_synth.env import canned
from data_synth.env.context import EnvContext
from data_synth.env.decompose import Decompose
from data_synth.env.merge import MergeTools
from data_synth.env.necessity import LabelNecessity
from data_synth.env.records import QA, Labeled, Merged, Scored, Seed, Selected, Tooled
from data_synth.env.tools import SynthesizeTools
from data_synth.env.verify import Select, Verify
from data_synth.pipeline import read_envelopes, read_outputs, run_step
from env_registry.spec import EnvSpec
from env_registry.structure import check_structure
from env_registry.validate import replay_env

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def sandbox():
    pool = SandboxPool(SandboxConfig(workers=1, call_timeout_s=2.0))
    yield pool
    await pool.aclose()


def _seed(target="parallel_multi_hop", hops=(1, 6)):
    return Seed(
        key="s0",
        mode="domain",
        domain="Travel",
        text="",
        hop_min=hops[0],
        hop_max=hops[1],
        target_type=target,
        source="test:1",
    )


def _responder(overrides):
    """canned replies, except for the steps in `overrides`: step -> fn(payload, n) -> reply."""
    counts = {}

    def respond(step, payload):
        if step in overrides:
            n = counts[step] = counts.get(step, -1) + 1
            reply = overrides[step](payload, n)
            if reply is not None:
                return reply
        return canned.respond(step, payload)

    return respond


async def _run(
    tmp_path, sandbox, overrides=None, *, target="parallel_multi_hop", min_quality=0.0, tools_kw=None, merge_retries=3
):
    """Run one seed through every step; returns {step: envelope of the seed}."""
    backend = ScriptedBackend(responder=_responder(overrides or {}))
    ctx = EnvContext(llm=LLMClient(backend, model="scripted", max_retries=1, backoff_base_s=0.001), sandbox=sandbox)
    steps = [
        (Decompose(), lambda: [_seed(target)]),
        (LabelNecessity(), lambda: read_outputs(tmp_path, "env.decompose", QA)),
        (Verify(), lambda: read_outputs(tmp_path, "env.necessity", Labeled)),
        (Select(min_quality, 1, 0), lambda: read_outputs(tmp_path, "env.verify", Scored)),
        (
            SynthesizeTools(**({"inner_retries": 2, "outer_retries": 2} | (tools_kw or {}))),
            lambda: read_outputs(tmp_path, "env.select", Selected),
        ),
        (MergeTools(merge_retries), lambda: read_outputs(tmp_path, "env.tools", Tooled)),
    ]
    out = {}
    for step, inputs in steps:
        stats = await run_step(step, inputs(), tmp_path, ctx=ctx, progress=False)
        env = read_envelopes(tmp_path, step.name).get("s0")
        if env is None:
            break
        out[step.name] = env
        assert stats.processed + stats.skipped_done == 1
        if env.status != "ok":
            break
    await ctx.llm.aclose()
    out["_requests"] = backend.requests
    return out


def _last(out):
    return [v for k, v in out.items() if not k.startswith("_")][-1]


@pytest.mark.parametrize("target", ["single_hop", "multi_hop", "parallel_single_hop", "parallel_multi_hop"])
async def test_canned_replies_make_valid_environments(tmp_path, sandbox, target):
    out = await _run(tmp_path, sandbox, target=target)
    assert out["env.merge"].status == "ok", _last(out)
    merged = Merged.model_validate(out["env.merge"].out[0])
    env = EnvSpec.model_validate(merged.env)
    assert env.scenario_type.value == target
    assert check_structure(env) == [] and await replay_env(env, sandbox) == []
    if target in ("parallel_single_hop", "parallel_multi_hop"):  # two temperature lookups merged into one tool
        assert ["q1", "q2"] in merged.clusters and len({t.name for t in env.tools}) == len(env.tools)
        merged_tool = env.tool("get_current_temperature")
        assert len(merged_tool.golden_calls) == 2
    tooled = Tooled.model_validate(out["env.tools"].out[0])
    assert all(t.scaled and "response_format" in t.parameters["properties"] for t in tooled.tools)
    assert env.provenance.prompt_version.count("@") == 5  # decompose, necessity, verify, tools, merge


def always(reply):
    return lambda payload, n: reply


def first(reply):
    """`reply` for the first request only, the canned answer afterwards."""
    return lambda payload, n: reply if n == 0 else None


def _canned_code(payload):
    return canned.respond("env.tools.implement", payload)


def _decompose_with(fn):
    def override(payload, n):
        trace = canned.decompose(canned._user(payload))
        fn(trace)
        return json.dumps(trace)

    return override


def _cycle(trace):
    trace["trace"][0]["dependency"] = [trace["trace"][-1]["_uuid"]]


def _internal_non_tool(payload, n):
    ids = [i for i, _ in canned._trace_ids(canned._user(payload))]
    return json.dumps({"labels": [{"_uuid": i, "tool_necessity": i != "q1", "reason": ""} for i in ids]})


def _not_atomic(payload, n):
    ids = [i for i, _ in canned._trace_ids(canned._user(payload))]
    return json.dumps({"nodes": [{"_uuid": i, "atomic": False, "reason": "bundles two lookups"} for i in ids]})


RAISES = "```python\ndef {name}(**kw):\n    raise RuntimeError('backend down')\n```"
WRONG = "```python\ndef {name}(**kw):\n    print('the value is 12345')\n    return {{'result': 'unknown'}}\n```"
HOSTILE = "```python\nimport os\ndef {name}(**kw):\n    return os.listdir('/')\n```"


def _code(template):
    def override(payload, n):
        name = canned._json_block(canned._user(payload))["name"]
        return template.format(name=name)

    return override


def _merge_serving_first_only(payload, n):
    """Edits the mock data for the first member only: the second member's call breaks."""
    reply = canned.respond("env.merge.merge", payload)
    code, rest = reply.split("```\n```json\n")
    lines = code.splitlines()
    records = ast.literal_eval(lines[1].split(" = ", 1)[1])
    lines[1] = f"RECORDS = {records[:1]!r}"
    return "\n".join(lines) + "\n```\n```json\n" + rest


def _merge_flagging_json(payload, n):
    """A merge that works, but sets an attribute on the shared `json` module when loaded."""
    return canned.respond("env.merge.merge", payload).replace(
        "```python\n", "```python\nimport json\njson.astra_flag = True\n", 1
    )


def _subtract_upset_by_the_flag(payload, n):
    """The difference tool: right alone, wrong once another tool set `json.astra_flag`."""
    reply = canned.respond("env.tools.implement", payload)
    if "def subtract_values(" not in reply:
        return reply
    guard = "):\n    if getattr(json, 'astra_flag', False):\n        return {'result': 'interfered'}\n    given"
    return reply.replace("```python\n", "```python\nimport json\n", 1).replace("):\n    given", guard, 1)


def _split_clusters(payload, n):
    ids = re.findall(r"^- (\w+): ", canned._user(payload), re.MULTILINE)
    return json.dumps({"clusters": [{"members": [i], "intent": "x"} for i in ids]})


CASES = {
    # step 1: decompose
    "junk": ({"env.decompose": always("lorem ipsum dolor")}, "env.decompose", "rejected", "env.decompose:no_json"),
    "refusal": (
        {"env.decompose": always("I'm sorry, but I can't help with that request.")},
        "env.decompose",
        "rejected",
        "env.decompose:no_json",
    ),
    "truncated": (
        {"env.decompose": always('```json\n{"question": "Q?", "trace": [{"_uuid": "q1", ')},
        "env.decompose",
        "rejected",
        "env.decompose:truncated",
    ),
    "wrong_keys": (
        {"env.decompose": always('{"query": "Q?", "steps": []}')},
        "env.decompose",
        "rejected",
        "env.decompose:not_a_trace",
    ),
    "cycle": ({"env.decompose": _decompose_with(_cycle)}, "env.decompose", "rejected", "env.decompose:cyclic"),
    "repaired": ({"env.decompose": first("<think>hmm</think> no json here")}, "env.merge", "ok", None),
    # step 2: necessity
    "internal_non_tool": ({"env.necessity": _internal_non_tool}, "env.necessity", "rejected", "non_tool_internal_node"),
    "labels_missing": (
        {"env.necessity": always('{"labels": []}')},
        "env.necessity",
        "rejected",
        "env.necessity:missing_ids",
    ),
    # step 3: verify
    "judge_junk": (
        {"env.verify.atomicity": always("atomic: yes")},
        "env.verify",
        "rejected",
        "env.verify.atomicity:no_json",
    ),
    "low_quality": ({"env.verify.atomicity": _not_atomic}, "env.select", "rejected", "below_quality_threshold"),
    # step 4: tools
    "schema_junk": (
        {"env.tools.schema": always("get_weather: city -> temp")},
        "env.tools",
        "rejected",
        "tool_synthesis_failed:schema",
    ),
    "scale_breaks": (
        {"env.tools.scale": always(json.dumps({**canned.schema_for("temperature in X"), "name": "renamed"}))},
        "env.tools",
        "rejected",
        "tool_synthesis_failed:scale",
    ),
    "call_not_literal": (
        {"env.tools.call": always('{"call": "x(city=__import__(\\"os\\").getcwd())"}')},
        "env.tools",
        "rejected",
        "tool_synthesis_failed:call",
    ),
    "code_raises": (
        {"env.tools.implement": _code(RAISES)},
        "env.tools",
        "rejected",
        "tool_synthesis_failed:code_error",
    ),
    "code_wrong_answer": (
        {"env.tools.implement": _code(WRONG)},
        "env.tools",
        "rejected",
        "tool_synthesis_failed:wrong_output",
    ),
    "code_hostile": (
        {"env.tools.implement": _code(HOSTILE)},
        "env.tools",
        "rejected",
        "tool_synthesis_failed:code_static",
    ),
    "code_fixed_on_retry": (
        {"env.tools.implement": lambda p, n: _code(WRONG)(p, n) if n == 0 else None},
        "env.merge",
        "ok",
        None,
    ),
    # step 5: merge
    "merge_breaks_member": ({"env.merge.merge": _merge_serving_first_only}, "env.merge", "rejected", "merge_failed"),
    "cluster_not_partition": (
        {"env.merge.cluster": always('{"clusters": [{"members": ["q1"]}]}')},
        "env.merge",
        "rejected",
        "env.merge.cluster:not_a_partition",
    ),
    "duplicate_names": ({"env.merge.cluster": _split_clusters}, "env.merge", "rejected", "duplicate_tool_names"),
    "works_only_alone": (
        {"env.tools.implement": _subtract_upset_by_the_flag, "env.merge.merge": _merge_flagging_json},
        "env.merge",
        "rejected",
        "golden_replay_failed",
    ),
    # transport: no reply at all is an error (retried by a rerun), not a rejection
    "unavailable": (
        {"env.necessity": always({"error": {"kind": "http", "status": 503}})},
        "env.necessity",
        "error",
        "llm_unavailable",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
async def test_malformed_output_is_rejected_with_reason(tmp_path, sandbox, case):
    overrides, step, status, reason = CASES[case]
    out = await _run(tmp_path, sandbox, overrides, min_quality=0.9)
    env = out[step]
    assert _last(out) is env, f"the record should stop at {step}, got {list(out)}"
    assert (env.status, env.reason) == (status, reason), env.detail
    if status != "ok":
        assert env.detail, "a rejection says what was wrong"


async def test_repair_round_and_retry_feedback_reach_the_model(tmp_path, sandbox):
    out = await _run(
        tmp_path,
        sandbox,
        {"env.tools.implement": lambda p, n: _code(WRONG)(p, n) if n == 0 else None},
        target="single_hop",
    )
    tooled = Tooled.model_validate(out["env.tools"].out[0])
    assert tooled.tools[0].inner_attempts == 2
    retry = [p for s, p in out["_requests"] if s == "env.tools.implement"][1]["messages"]
    assert "does not contain the expected answer" in retry[-1]["content"] and retry[-2]["role"] == "assistant"


async def test_error_record_is_retried_by_a_rerun(tmp_path, sandbox):
    out = await _run(tmp_path, sandbox, {"env.necessity": always({"error": {"kind": "http", "status": 503}})})
    assert out["env.necessity"].status == "error"
    out = await _run(tmp_path, sandbox)
    assert out["env.merge"].status == "ok"
    assert [s for s, _ in out["_requests"]].count("env.decompose") == 0  # decompose was done: not asked again


async def test_a_merge_that_breaks_a_member_in_the_replay_is_told_which_and_retried(tmp_path, sandbox):
    out = await _run(
        tmp_path, sandbox, {"env.merge.merge": lambda p, n: _merge_serving_first_only(p, n) if n == 0 else None}
    )
    assert out["env.merge"].status == "ok", out["env.merge"].detail
    merged = Merged.model_validate(out["env.merge"].out[0])
    assert merged.merge_attempts == {"q1": 2}
    retry = [p for s, p in out["_requests"] if s == "env.merge.merge"][1]["messages"]
    assert retry[-2]["role"] == "assistant" and retry[-1]["content"].count("q2: ") == 1
    assert "does not contain" in retry[-1]["content"] and "q1: " not in retry[-1]["content"]
