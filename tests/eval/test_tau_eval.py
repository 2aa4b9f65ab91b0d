"""`python -m astra_verl.eval tau`: rows built once, episodes through astra_tool_agent with the
scripted user, τ-bench's reward, pass^k, resumable results."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from taukit import require_tau_bench

from astra_foundation.strict import SettingsError
from astra_verl.eval.tau_eval import TauEvalConfig, TauEvaluation, format_table, pass_hat_k
from astra_verl.rollout.testing import ScriptedServer

OVERRIDES = ["data.max_prompt_length=16384", "data.max_response_length=16384"]


def test_pass_hat_k_is_taus():
    records = [{"task": "a", "reward": r} for r in (1.0, 1.0, 0.0)] + [
        {"task": "b", "reward": r} for r in (1.0, 0.0, 0.0)
    ]
    scores = pass_hat_k(records, 3)
    assert scores[1] == pytest.approx((2 / 3 + 1 / 3) / 2) and scores[2] == pytest.approx((1 / 3 + 0) / 2)
    assert scores[3] == 0.0 and pass_hat_k(records[:2], 3) == {}


def test_settings_need_the_user_endpoint(tmp_path):
    with pytest.raises(SettingsError, match="--user-base-url and --user-model"):
        TauEvalConfig(domain="retail", out=tmp_path, model_path="m")
    with pytest.raises(SettingsError, match="--n > 1 needs --temperature"):
        TauEvalConfig(domain="retail", out=tmp_path, model_path="m", user="scripted", n=2)


def test_a_run_scores_gold_policies_and_resumes(tmp_path, tiny_model_dir, tiny_tokenizer):
    require_tau_bench()
    cfg = TauEvalConfig(
        domain="retail",
        split="dev",
        out=tmp_path,
        model_path=str(tiny_model_dir),
        user="scripted",
        limit=2,
        overrides=OVERRIDES,
    )
    evaluation = TauEvaluation(cfg, progress=False)
    assert len(pd.read_parquet(tmp_path / "rows" / "retail_dev.parquet")) == 2  # built on first use
    targets = [json.loads(r["reward_model"]["ground_truth"]) for r in evaluation.rows]
    gold = {t["task"]: json.loads(t["actions"]) for t in targets}

    def script(prompt: str, k: int) -> str:
        # The policy: task 0's gold actions whatever the task (right on retail/dev/0 only), then a reply.
        actions = gold["retail/dev/0"]
        if k < len(actions):
            return (
                "<tool_call>\n"
                + json.dumps({"name": actions[k]["name"], "arguments": actions[k]["kwargs"]})
                + "\n</tool_call>"
            )
        return "Your order is cancelled."

    evaluation.server = ScriptedServer(tiny_tokenizer, script)
    records = evaluation.run()
    by_task = {r["task"]: r for r in records}
    assert by_task["retail/dev/0"]["reward"] == 1.0 and by_task["retail/dev/1"]["reward"] == 0.0
    assert all(r["ended_by"] == "user_stop" for r in records)
    assert "| 1 | 0.500 |" in format_table(cfg, records)
    again = TauEvaluation(cfg, progress=False)
    assert again.todo() == [] and len(again.run()) == 2  # resumed: nothing left to run
