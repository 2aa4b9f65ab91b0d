"""A τ-bench task end to end through `astra_tool_agent`: rows from the `tau_bench` family, the
`tau_user` hook's scripted user, τ-bench's tools in the sandbox, the `astra_tau` reward.

The rows are read from a folder they were moved to (self-contained: nothing else travels).
The scripted agent replays the task's gold actions (one call per turn) and then tells the user
the required outputs; the scripted user states the instruction, then says ###STOP###."""

from __future__ import annotations

import asyncio
import json
import shutil

import pandas as pd
import pytest
from taukit import require_tau_bench

from astra_foundation.sandbox import SandboxPool
from astra_verl.benchmarks.tau_reward import parse_target, score_episode
from astra_verl.calls.call_log import EpisodeLog, Termination
from astra_verl.reward.episode_reward import EpisodeReward
from astra_verl.rollout.testing import ScriptedServer, make_loop, run
from env_registry.call_gate import CallStatus
from env_registry.rows import RowInfo

DOMAIN, SPLIT, INDEX = "retail", "test", 19  # 7 gold actions (reads, then a return) and 2 required outputs


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    require_tau_bench()
    from env_registry.families import tau_rows

    # the rows travel: built in one folder, read from another, the first deleted (as on a node that
    # never saw the export)
    origin = tmp_path_factory.mktemp("tau")
    path = tau_rows.build(origin, DOMAIN, SPLIT, indices=[INDEX])
    moved = tmp_path_factory.mktemp("elsewhere") / path.name
    shutil.move(path, moved)
    shutil.rmtree(origin)
    rows = pd.read_parquet(moved).to_dict("records")
    assert all(RowInfo.from_extra_info(r["extra_info"]).self_contained for r in rows)
    return rows


@pytest.fixture(scope="module")
def cfg(trainer_config):
    return trainer_config(
        "actor_rollout_ref.rollout.prompt_length=16384",
        "actor_rollout_ref.rollout.response_length=16384",
        "+astra.sandbox.packages=[tau_bench,env_registry]",
        "+astra.sandbox.preload=['env_registry.families.tau_sandbox:load_databases']",
        "+astra.sandbox.memory_mb=2048",
        "astra.sandbox.call_timeout_s=30",
    )


def _loop_kwargs(row: dict) -> dict:
    extra = dict(row["extra_info"])
    return {
        "raw_prompt": list(row["prompt"]),
        "extra_info": extra,
        "interaction_kwargs": dict(extra["interaction_kwargs"]),
        "tools_kwargs": {},
        "index": 0,
    }


def _call(name: str, args: dict) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def _episode(cfg, tokenizer, row, actions, final, first=()):
    server = ScriptedServer(tokenizer, [*first, *(_call(n, a) for n, a in actions), final])
    out = run(make_loop(cfg, server, tokenizer).run({"temperature": 1.0}, **_loop_kwargs(row)))
    return out, EpisodeLog.from_extra_fields(out.extra_fields), server


def _reward(cfg, target, log) -> EpisodeReward:
    from env_registry.families import tau

    async def main():
        async with SandboxPool(tau.sandbox_config()) as pool:
            return await score_episode(pool, target, log)

    return asyncio.run(main())


def test_gold_episode_scores_one_and_user_turns_are_masked(cfg, tiny_tokenizer, rows):
    (row,) = rows
    target = parse_target(row["reward_model"]["ground_truth"])
    gold = [(a["name"], a["kwargs"]) for a in json.loads(target.actions)]
    assert gold[-1][0] == "return_delivered_order_items" and len(target.outputs) == 2
    final = "Done. " + ", ".join(target.outputs)
    # A two-message user: the instruction opens the conversation, a confirmation follows the
    # agent's first (call-free) reply, ###STOP### the last.
    (instruction,) = json.loads(row["extra_info"]["interaction_kwargs"]["script"])
    two = {**row, "extra_info": {**row["extra_info"]}}
    confirm = "Yes, please go ahead with that."
    two["extra_info"]["interaction_kwargs"] = {
        **row["extra_info"]["interaction_kwargs"],
        "script": json.dumps([instruction, confirm]),
    }
    out, log, server = _episode(cfg, tiny_tokenizer, two, gold, final, first=["Let me look into it."])
    assert log.hook == "tau_user" and log.terminated_by is Termination.HOOK
    assert [c.status for c in log.calls] == [CallStatus.OK] * len(gold)
    # the first went into the prompt: one turn after it, as EpisodeLog.user_turns counts
    assert log.user_turns == log.hook_state["user_turns_listed"] == 1
    assert log.hook_state["responses"] == ["Let me look into it.", final]
    assert log.hook_state["ended_by"] == "user_stop"
    assert instruction[:40] in tiny_tokenizer.decode(out.prompt_ids)
    # Mask 1 on exactly the generated tokens: the user's confirmation and the tool results are
    # observations (mask 0) and sit in the response verbatim, between the generated turns.
    (turns,) = server.emitted.values()
    generated = [t for t, m in zip(out.response_ids, out.response_mask, strict=True) if m]
    assert generated == [tok for turn in turns for tok in turn]
    observed = tiny_tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask, strict=True) if not m])
    assert confirm in observed
    scored = _reward(cfg, target, log)
    assert scored.reward == 1.0 and scored.extra_info["tau_action_f1"] == pytest.approx(1.0, abs=1e-6)

    # Without the last write τ-bench's database check fails; without the outputs, its output check.
    _, dropped, _ = _episode(cfg, tiny_tokenizer, row, gold[:-1], final)
    assert _reward(cfg, target, dropped).extra_info["tau_r_actions"] == 0.0
    _, untold, _ = _episode(cfg, tiny_tokenizer, row, gold, "Done.")
    info = _reward(cfg, target, untold).extra_info
    assert (info["tau_r_actions"], info["tau_r_outputs"], info["tau_reward"]) == (1.0, 0.0, 0.0)
