"""The `tau_bench` family: environments from τ-bench's tasks, τ-bench's tools in the sandbox on a
per-session copy of the worker-preloaded database."""

from __future__ import annotations

import json

import pytest
from taukit import require_tau_bench

from astra_foundation.sandbox import BatchJob, Module, Program, run_programs
from env_registry.families import tau
from env_registry.spec import tool_module


@pytest.fixture(scope="module")
def retail():
    require_tau_bench()
    tasks = tau.load_tasks("retail", "dev")
    return tasks, [tau.task_spec(t) for t in tasks[:2]]


def test_a_task_becomes_an_environment_of_the_domains_tools(retail):
    tasks, (spec, _) = retail
    names = [info["function"]["name"] for info in tau.tool_infos("retail")]
    assert [t.name for t in spec.tools] == [*names, tau.STATE_TOOL]
    assert tau.shown_tools(spec) == names and "cancel_pending_order" in names
    assert spec.question == tasks[0].instruction and spec.domain == "tau_bench_retail"
    assert spec.provenance.source == f"tau_bench=={tau.tau_version()}:retail/dev/0"
    assert "retail agent" in tau.policy("retail").lower()
    assert [len(tau.load_tasks(d, s)) for d, s in [("retail", "train"), ("retail", "test"), ("airline", "test")]] == [
        500,
        115,
        50,
    ]
    with pytest.raises(tau.TauDataError, match="no split 'train'"):
        tau.load_tasks("airline", "train")


def test_state_is_fresh_per_session_and_errors_read_as_taus(retail):
    tasks, (spec, _) = retail
    order = tasks[0].actions[0][1]["order_id"]
    cancel = (tool_module("cancel_pending_order", spec.id), "cancel_pending_order")
    details = (tool_module("get_order_details", spec.id), "get_order_details")
    digest = (tool_module(tau.STATE_TOOL, spec.id), tau.STATE_TOOL, {})
    first, second = run_programs(
        [
            BatchJob(tau.program(spec), [digest, (*cancel, {"order_id": order, "reason": "no longer needed"}), digest]),
            BatchJob(tau.program(spec), [(*details, {"order_id": order}), digest, (*cancel, {"order_id": order})]),
        ],
        tau.sandbox_config(),
    )
    assert first[1].ok and json.loads(first[1].output)["status"] == "cancelled"
    assert first[0].output != first[2].output  # the write changed this session's database ...
    assert json.loads(second[0].output)["status"] == "pending" and second[1].output == first[0].output  # ... only
    # A tool raising (a missing argument) is an observation, as τ-bench's Env.step renders it.
    assert second[2].ok and second[2].output.startswith("Error: ") and "reason" in second[2].output


def test_workers_preload_both_databases_before_sessions_start(retail):
    probe = Program(
        (
            Module(
                "probe",
                "from env_registry.families import tau_sandbox\n\ndef loaded():\n    return sorted(tau_sandbox._databases)\n",
            ),
        )
    )
    (with_preload,) = run_programs([BatchJob(probe, [("probe", "loaded", {})])], tau.sandbox_config())
    (without,) = run_programs([BatchJob(probe, [("probe", "loaded", {})])], tau.sandbox_config(preload=[]))
    assert with_preload[0].output == '["airline", "retail"]' and without[0].output == "[]"


def test_env_registry_validate_replays_the_gold_actions_and_waives_what_tau_has_not(retail):
    from env_registry.validate import family_rules, validate_envs

    _, specs = retail
    rules = family_rules(specs[0])
    assert [c.args for c in rules.replay_calls(specs[0])] == [a for _, a in tau.task_of(specs[0]).actions]
    report = validate_envs(specs)
    assert report.ok and report.replayed == 2, report.issues
