"""ASTRA-RL-1k rows as released (no golden calls) train end to end: `import-astra` recovers their
calls and imports them as version-2 environments, `export-parquet` writes verl's rows, and one
`main_ppo +recipe=astra_cpu` step runs on them with our reward (the identifying-argument check
of the recovered calls) from the random tiny model.

The rows are ours in the release's format: the recovery fixtures (a chain read from a
background, an enum the task names, the release's defect kinds) and procedural single-hop worlds
exported with `export-astra-rl`, so the batch has enough recoverable rows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from training_cpu.test_grpo_cpu import check_run, main_ppo

FIXTURES = Path(__file__).resolve().parents[1] / "env_registry" / "data" / "astra_rl_recovery.jsonl"


@pytest.mark.slow
def test_grpo_step_on_imported_rl_1k_rows(tmp_path, tiny_model_dir, trainer_process):
    import pandas as pd

    def env_registry(*args: str):
        return trainer_process([sys.executable, "-m", "env_registry", "-q", *args], cwd=tmp_path)

    worlds, store = tmp_path / "worlds", tmp_path / "store"
    gen = env_registry(
        "--store", str(worlds), "generate", "--n", "4", "--max-hops", "1", "--scenario-types", "single_hop"
    )
    assert gen.returncode == 0, gen.stderr[-3000:]
    rows = tmp_path / "rl_rows.jsonl"
    assert (
        env_registry(
            "--store", str(worlds), "export-astra-rl", "--output-file", str(rows), "--no-system-prompt"
        ).returncode
        == 0
    )
    imported = env_registry("--store", str(store), "import-astra", str(rows), str(FIXTURES))
    assert "ASTRA-RL-1k golden-call recovery: 6 recovered, 2 unrecovered" in imported.stdout, imported.stdout[-3000:]
    export = env_registry(
        "--store", str(store), "export-parquet", "--out", str(tmp_path / "rl"), "--mixing", "none",
        "--tokenizer", str(tiny_model_dir), "--max-prompt-length", "1536", "--no-system-prompt",
    )  # fmt: skip
    assert export.returncode == 0, export.stderr[-3000:]
    data = tmp_path / "rl" / "mix_none"
    train = pd.read_parquet(data / "train.parquet")
    targets = [json.loads(t["ground_truth"]) for t in train["reward_model"]]
    assert all(q.get("call_check") for t in targets for q in t["sub_questions"])  # scored by our rule
    dump = tmp_path / "rollouts"
    proc = trainer_process(
        main_ppo(
            f"data.train_files={data / 'train.parquet'}",
            f"data.val_files={data / 'val.parquet'}",
            f"actor_rollout_ref.model.path={tiny_model_dir}",
            "data.max_prompt_length=1536",
            "data.max_response_length=64",
            "trainer.total_training_steps=1",
            f"trainer.rollout_data_dir={dump}",
        ),
        cwd=tmp_path,
    )
    check_run(proc, steps=1)
    samples = [json.loads(line) for line in Path(dump, "1.jsonl").read_text().splitlines()]
    assert samples and all("score" in s for s in samples)
