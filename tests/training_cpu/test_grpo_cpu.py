"""verl's own PPO loop (`main_ppo`, GRPO) on CPU with the CPU platform and the hf_cpu rollout backend.

Two runs, each a fresh `python -m verl.trainer.main_ppo +recipe=astra_cpu` process as a user starts it:
- with verl's own parts (single_turn_agent, naive reward with a trivial score), from the random tiny
  model: the platform and the backend alone, 2 steps;
- with ours (astra_tool_agent, astra_f1) on procedural environments, from the tiny model fitted to their
  golden calls by the SFT test's run: a greedy validation pass, whose rewards come from tool calls run in
  the sandbox, and 1 sampled step, whose dump, episode records and metrics agree.

Weight sync is proven from two sides: the hf_cpu server checks, at every sync, that a checksum of what
it now holds equals the checksum of the tensors the actor sent, and logs it per step (the checksums
differ from step to step: the actor's weights changed and the rollout got them); and verl's own
`rollout_corr/*` metrics compare the rollout's log-probs with the actor's recomputation each step.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

STEP_LINE = re.compile(r"step:(\d+) - (.*)")
SYNC_LINE = re.compile(r"hf_cpu replica (\d+): weights of step (\d+) loaded \((\d+) tensors, checksum (\w+) = actor's")

SCORE = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """Trivial and continuous (share of digits), so GRPO groups have non-zero advantages."""
    return sum(c.isdigit() for c in solution_str) / max(1, len(solution_str))
'''


def step_metrics(stdout: str) -> dict[int, dict[str, float]]:
    """The console logger's `step:N - key:value - ...` lines, by step."""
    steps: dict[int, dict[str, float]] = {}
    for match in STEP_LINE.finditer(stdout):
        metrics = {}
        for item in match.group(2).split(" - "):
            key, _, value = item.rpartition(":")
            try:
                metrics[key] = float(re.sub(r"^np\.\w+\((.*)\)$", r"\1", value.strip()))
            except ValueError:
                continue
        steps[int(match.group(1))] = metrics
    return steps


def weight_syncs(stdout: str) -> dict[int, str]:
    """hf_cpu's audit lines: global step -> checksum of the weights the rollout holds (verified = actor's)."""
    return {int(m.group(2)): m.group(4) for m in SYNC_LINE.finditer(stdout)}


def main_ppo(*overrides: str) -> list[str]:
    return [sys.executable, "-m", "verl.trainer.main_ppo", "+recipe=astra_cpu", *overrides]


def check_run(proc, steps: int) -> tuple[dict[int, dict[str, float]], dict[int, str]]:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    metrics, syncs = step_metrics(out), weight_syncs(out)
    val_before_train = metrics.pop(0, None)  # verl logs a validation pass before training as step 0
    assert val_before_train is None or all(k.startswith("val") for k in val_before_train), val_before_train
    assert sorted(metrics) == list(range(1, steps + 1)), out[-3000:]
    # the initial sync (step 0) and one after every step, each verified against the actor's tensors
    assert sorted(syncs) == list(range(0, steps + 1)), out[-3000:]
    assert len(set(syncs.values())) == steps + 1, syncs  # the actor's weights changed at every step
    for step, m in metrics.items():
        # the rollout sampled with the weights the actor then scored: fp32 on both sides, so ~0
        assert m["rollout_corr/log_ppl_abs_diff"] < 1e-3, (step, m["rollout_corr/log_ppl_abs_diff"])
        print(f"step {step}: {m['timing_s/step']:.2f} s (gen {m['timing_s/gen']:.2f} s)")
    return metrics, syncs


@pytest.mark.slow
def test_grpo_with_verls_own_parts(tmp_path, tiny_model_dir, trainer_process):
    import pandas as pd

    rows = [
        {
            "data_source": "toy_sum",
            "prompt": [{"role": "user", "content": f"What is {i} + 3? Answer with a number."}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(i + 3)},
            "extra_info": {"index": i},
            "agent_name": "single_turn_agent",
        }
        for i in range(4)
    ]
    pd.DataFrame(rows).to_parquet(tmp_path / "toy.parquet")
    (tmp_path / "score.py").write_text(SCORE)
    proc = trainer_process(
        main_ppo(
            f"data.train_files={tmp_path / 'toy.parquet'}",
            f"data.val_files={tmp_path / 'toy.parquet'}",
            f"actor_rollout_ref.model.path={tiny_model_dir}",
            "reward.reward_manager.name=naive",
            f"reward.custom_reward_function.path={tmp_path / 'score.py'}",
            "data.max_prompt_length=64",
            "data.max_response_length=16",
            "trainer.total_training_steps=2",
        ),
        cwd=tmp_path,
    )
    metrics, _ = check_run(proc, steps=2)
    assert all(m["actor/grad_norm"] > 0 for m in metrics.values())


@pytest.mark.slow
def test_astra_grpo_step_scores_real_sandboxed_tool_calls(
    tmp_path, procedural_envs, golden_sft_parquet, sft_run, trainer_process
):
    import pandas as pd

    assert sft_run.proc.returncode == 0, sft_run.proc.stderr[-3000:]
    dump, val_dump, train = tmp_path / "rollouts", tmp_path / "validation", procedural_envs / "train.parquet"
    proc = trainer_process(
        main_ppo(
            f"data.train_files={train}",
            # validation on the rows the SFT run fitted, greedy (verl's val_kwargs default), before the step
            f"data.val_files={train}",
            "trainer.val_before_train=true",
            f"trainer.validation_data_dir={val_dump}",
            f"actor_rollout_ref.model.path={sft_run.checkpoint / 'huggingface'}",
            "data.max_prompt_length=1536",
            # room for a tool round: fahu_climate_year's answer (12 monthly values) alone is ~130 tokens,
            # and with 256 a sampled step whose episodes all called it ended each one max_length before
            # the tool message entered the context (CI, 2026-12-06)
            "data.max_response_length=512",
            "trainer.total_training_steps=1",
            "actor_rollout_ref.rollout.n=16",
            "actor_rollout_ref.rollout.temperature=0.2",
            f"trainer.rollout_data_dir={dump}",
        ),
        cwd=tmp_path,
    )
    metrics, _ = check_run(proc, steps=1)
    golden_outputs = {
        m["content"] for row in pd.read_parquet(golden_sft_parquet)["messages"] for m in row if m["role"] == "tool"
    }
    # Greedy validation episodes, through the same agent loop and reward as the step: a golden call the
    # policy repeated got the output the tool code gives in the sandbox, byte for byte, and scored. Greedy,
    # because sampled episodes of the 60-step tiny model may all degenerate (no golden call among 2 x 16
    # samples at temperature 0.2 in one CI run): a model's luck, not the plugin's.
    (val_file,) = sorted(val_dump.glob("*.jsonl"))
    greedy = [json.loads(line) for line in val_file.read_text().splitlines()]
    assert any(g in v["output"] for v in greedy for g in golden_outputs), [v["output"][:300] for v in greedy]
    assert any(v["score"] > 0 for v in greedy), [(v["score"], v["output"][:300]) for v in greedy]

    # The sampled training step: its responses carry the tools' outputs (masked from the loss), and what
    # verl dumped, astra's episode records and astra's step metrics agree on every episode.
    samples = [json.loads(line) for line in Path(dump, "1.jsonl").read_text().splitlines()]
    answered = [s for s in samples if "<tool_response>" in s["output"]]
    assert answered, [s["output"][:200] for s in samples]
    step = metrics[1]
    assert step["astra/calls_per_episode/mean"] > 0, step
    from astra_verl.inspect.records import read_records

    records = {r.uid: r for r in read_records(dump / "episodes" / "1.jsonl")}
    assert set(records) == {s["uid"] for s in samples}
    assert all(records[s["uid"]].reward == pytest.approx(s["score"]) for s in samples)
    assert sum(r.scores["calls"] for r in records.values()) / len(records) == pytest.approx(
        step["astra/calls_per_episode/mean"]
    )
    solved = sum(r.scores["solved"] for r in records.values()) / sum(r.scores["n"] for r in records.values())
    assert step["astra/solved_rate"] == pytest.approx(solved)
    assert step["critic/score/max"] == pytest.approx(max(s["score"] for s in samples))
