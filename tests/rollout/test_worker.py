"""The full verl path without Ray: store -> banded mix -> export parquet -> RLHFDataset ->
`AgentLoopWorker.generate_sequences` -> the padded batch the trainer consumes."""

from __future__ import annotations

import re

import numpy as np
import pytest

from astra_verl.calls.call_log import EpisodeLog
from astra_verl.rollout.testing import ScriptedServer, run


@pytest.fixture(scope="module")
def exported(tmp_path_factory, kit):
    from env_registry.export import ExportConfig, export_rows, write_export
    from env_registry.families.procedural import generate
    from env_registry.mixing import build_mixer
    from env_registry.store import EnvStore

    root = tmp_path_factory.mktemp("worker")
    path = kit.write_store(root / "store", generate(12, seed=1))
    store = EnvStore.open(path)
    cfg = ExportConfig(mixing_mode="banded", val_fraction=0.0)
    result = export_rows(store, config=cfg, mixer=build_mixer(store, "banded", seed=0, k=1), progress=False)
    folder = write_export(result, root / "rows", cfg, extra={})
    return folder / "train.parquet", store


def script(prompt: str, k: int) -> str:
    """Turn 1: call the first shown tool without arguments, and an unknown tool; turn 2: answer."""
    if k == 0:
        first = re.search(r'"name": "(\w+)"', prompt.split("<tools>\n", 1)[1]).group(1)
        return (
            f'<tool_call>\n{{"name": "{first}", "arguments": {{}}}}\n</tool_call>'
            '<tool_call>\n{"name": "no_such_tool", "arguments": {}}\n</tool_call>'
        )
    return "I cannot tell."


def test_generate_sequences_from_exported_parquet(exported, trainer_config, tiny_tokenizer):
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    parquet, store = exported
    cfg = trainer_config(
        "data.return_raw_chat=true",
        "actor_rollout_ref.rollout.prompt_length=8192",  # the tiny BPE spends many tokens on tool schemas
        "actor_rollout_ref.rollout.agent.default_agent_loop=single_turn_agent",  # rows name their loop
    )
    dataset = RLHFDataset([str(parquet)], tiny_tokenizer, cfg.data, processor=None)
    rows = [dataset[i] for i in range(4)]
    batch = DataProto.from_single_dict(collate_fn(rows)).repeat(repeat_times=2, interleave=True)  # G = 2
    server = ScriptedServer(tiny_tokenizer, script)
    worker = AgentLoopWorker(cfg, llm_client=server)
    out = run(worker.generate_sequences(batch))

    resp_len, prompt_len = cfg.actor_rollout_ref.rollout.response_length, cfg.actor_rollout_ref.rollout.prompt_length
    assert out.batch["responses"].shape == (8, resp_len)
    assert out.batch["input_ids"].shape == (8, prompt_len + resp_len)
    assert (out.batch["response_mask"] <= out.batch["attention_mask"][:, prompt_len:]).all()
    # mask 1 exactly on generated tokens: the count equals what the server emitted, per sample
    emitted = sorted(sum(len(t) for t in turns) for turns in server.emitted.values())
    assert sorted(out.batch["response_mask"].sum(dim=1).tolist()) == emitted

    logs = [EpisodeLog.from_dict(d) for d in out.non_tensor_batch["astra_episode"]]
    for log, rid in zip(logs, out.non_tensor_batch["index"], strict=True):
        spec = store.get(log.env_id)
        assert log.assistant_turns == 2 and len(log.calls) == 2
        assert log.calls[1].status.value == "unknown_tool"
        assert log.final_answer == "I cannot tell."
        assert rid is not None and spec is not None
    # the rows were mixed: distractors are shown and logged as such when called
    infos = [row["extra_info"]["astra"] for row in rows]
    assert any('"distractor": true' in i for i in infos)
    assert np.all(out.non_tensor_batch["__num_turns__"] == 1 + 2 + 1)
