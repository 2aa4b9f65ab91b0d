"""Faithfulness: BFCL's ground truth replayed through the adapter passes BFCL's checker, a broken
sequence fails it, observations equal BFCL's executor's, and rollouts never share state."""

from __future__ import annotations

import asyncio
import json

import pytest

from astra_foundation.llm import LLMClient, ScriptedBackend
from astra_verl.eval import bfcl_replay
from astra_verl.eval.bfcl_replay import ReplayError, parse_call, run_replay
from astra_verl.eval.chat_rollout import ChatRollout
from env_registry.call_gate import CallStatus


def test_ground_truth_strings_parse_into_tool_calls():
    owner = {"sort": "GorillaFileSystem", "cd": "GorillaFileSystem"}
    assert parse_call("sort('final_report.pdf')", owner) == ("sort", {"file_name": "final_report.pdf"})
    assert parse_call("cd(folder='..')", owner) == ("cd", {"folder": ".."})
    for bad, match in [("cd(folder=x)", "non-literal"), ("os.system('x')", "plain function"), ("rm(x=1)", "none of")]:
        with pytest.raises(ReplayError, match=match):
            parse_call(bad, owner)


def test_every_ground_truth_call_of_every_entry_parses():
    from env_registry.families import bfcl

    entries = bfcl.load_entries()
    assert sum(len(t) for e in entries for t in bfcl_replay.turn_calls(e)) == sum(
        len(t) for e in entries for t in e.ground_truth
    )


def test_replaying_the_ground_truth_passes_and_a_broken_sequence_fails(tmp_path, bfcl_sample, bfcl_sandbox_config):
    ids = bfcl_sample.ids
    good = run_replay(tmp_path / "gt", ids=ids, categories=_categories(), sandbox=bfcl_sandbox_config, progress=False)
    records = list(good.results.records.values())
    assert len(records) == len(ids) and all(r.valid for r in records), [
        (r.id, r.verdict) for r in records if not r.valid
    ]
    compared, mismatches = good.observations
    assert compared > 30 and mismatches == []  # every observation is what BFCL's executor returns
    bad = run_replay(
        tmp_path / "wrong",
        ids=ids,
        categories=_categories(),
        wrong=True,
        sandbox=bfcl_sandbox_config,
        observations=False,
        progress=False,
    )
    assert not any(r.valid for r in bad.results.records.values())


def _categories():
    from env_registry.families.bfcl import CATEGORIES

    return list(CATEGORIES)


def _rollout(pool, plans):
    client = LLMClient(ScriptedBackend(responder=bfcl_replay.responder(plans)), model="replay")
    return ChatRollout(client, pool, hook_overrides={"call_style": "fc"})  # OpenAI tool calls: BFCL's FC handler


def test_rollouts_of_one_entry_never_share_state(bfcl_sample, bfcl_sandbox_config):
    """A GRPO group: rollouts of one entry at once; one creates a directory the other must not see."""
    from astra_foundation.sandbox import SandboxPool

    row = bfcl_sample.data.rows[bfcl_sample.index["multi_turn_base_0"]]
    writer = [[("cd", {"folder": "document"}), ("mkdir", {"dir_name": "probe_dir"}), ("ls", {})]]
    reader = [[("cd", {"folder": "document"}), ("ls", {})]]
    plans = {"w": writer, **{f"r{i}": reader for i in range(3)}}

    async def main():
        async with SandboxPool(bfcl_sandbox_config) as pool:
            rollout = _rollout(pool, plans)
            return await asyncio.gather(*(rollout.run(row, step=label) for label in plans))

    results = dict(zip(plans, asyncio.run(main()), strict=True))
    assert "probe_dir" in results["w"].log.calls[-1].output
    for label in ("r0", "r1", "r2"):
        listing = json.loads(results[label].log.calls[-1].output)["current_directory_content"]
        assert "probe_dir" not in listing and "final_report.pdf" in listing


def test_a_held_back_function_is_callable_only_from_its_turn(bfcl_sample, bfcl_sandbox_config):
    from astra_foundation.sandbox import SandboxPool

    index = bfcl_sample.index["multi_turn_miss_func_0"]
    entry, row = bfcl_sample.data.entries[index], bfcl_sample.data.rows[index]
    turns = bfcl_replay.turn_calls(entry)
    early = [[("sort", {"file_name": "final_report.pdf"}), *turns[0]], *turns[1:]]

    async def main():
        async with SandboxPool(bfcl_sandbox_config) as pool:
            return await _rollout(pool, {"early": early}).run(row, step="early")

    result = asyncio.run(main())
    sorts = [c for c in result.log.calls if c.tool == "sort"]
    assert sorts[0].status is CallStatus.UNKNOWN_TOOL and sorts[0].turn == 1  # hidden until turn 3
    assert sorts[-1].status is CallStatus.OK and sorts[-1].turn >= result.log.hook_state["turn_starts"][3]
    holdout = [m for m in result.messages if m["role"] == "user"][3]["content"]
    assert '"name": "sort"' in holdout  # prompting mode: the new function is listed, then BFCL's sentence
    assert holdout.endswith("I have updated some more functions you can choose from. What about now?")
    assert result.log.user_turns == len(entry.turns) - 1
