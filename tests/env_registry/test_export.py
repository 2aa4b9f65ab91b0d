"""Export to verl rows: RLHFDataset loads them, splits respect near-duplicates, prompt lengths."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest

from env_registry.export import (
    ExportConfig,
    ExportError,
    assign_splits,
    count_prompt_tokens,
    export_rows,
    messages_for,
    question_key,
    tool_schemas,
    write_export,
)
from env_registry.rows import AGENT_NAME, RowInfo, ToolRef, embedded_spec
from env_registry.spec import RewardTarget
from env_registry.store import EnvStore


def test_rows_load_with_verl_rlhf_dataset(tmp_path, store_path, tiny_tokenizer):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    store = EnvStore.open(store_path)
    cfg = ExportConfig(val_fraction=0.2)
    result = export_rows(store, config=cfg, progress=False)
    assert len(result.train) + len(result.val) == len(store) and result.val
    folder = write_export(result, tmp_path / "out", cfg, {})
    assert sorted(p.name for p in folder.iterdir()) == [
        "dropped.jsonl",
        "manifest.json",
        "train.parquet",
        "val.parquet",
    ]
    data_cfg = OmegaConf.create(
        {"prompt_key": "prompt", "max_prompt_length": 4096, "filter_overlong_prompts": True,
         "cache_dir": str(tmp_path / "cache"), "filter_overlong_prompts_workers": 1}
    )  # fmt: skip
    ds = RLHFDataset(str(folder / "train.parquet"), tiny_tokenizer, data_cfg)
    assert len(ds) == len(result.train)
    item = ds[0]
    assert item["agent_name"] == AGENT_NAME and item["data_source"].startswith("astra/")
    assert item["interaction_kwargs"] == {"name": "astra_default"}
    assert [m["role"] for m in item["raw_prompt"]] == ["system", "user"]
    info = RowInfo.from_extra_info(item["extra_info"])
    env = store.get(info.env_id)
    assert item["raw_prompt"][-1]["content"] == env.question
    assert info.tools == [ToolRef(env.id, t.name) for t in env.tools]
    assert info.store is None and embedded_spec(info) == env  # self-contained: the row carries its spec
    target = RewardTarget.model_validate_json(item["reward_model"]["ground_truth"])
    assert target == env.reward_target() and item["reward_model"]["style"] == "rule"
    assert item["extra_info"]["split"] == "train" and item["extra_info"]["index"] == 0
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["train_rows"] == len(result.train) and manifest["mixing"]["mode"] == "none"


def test_question_key_collapses_case_digits_punctuation():
    assert question_key("What is the population of Brenholm in 2024?") == question_key(
        "what is the  population of BRENHOLM in 1999!!"
    )
    assert question_key("Population of Brenholm?") != question_key("Population of Quastow?")


def test_near_duplicates_never_straddle_the_split(envs):
    variants = []
    for i, env in enumerate(envs):
        # The same question up to case, punctuation and the digits it contains.
        for q in (env.question, env.question.upper().replace("?", " ?!"), re.sub(r"\d", str(i % 10), env.question)):
            variants.append(env.model_copy(update={"question": q}).with_id())
    split = assign_splits(variants, seed=0, val_fraction=0.3)
    by_key: dict[str, set[str]] = {}
    for v in variants:
        by_key.setdefault(question_key(v.question), set()).add(split[v.id])
    assert len(by_key) == len(envs)
    assert all(len(s) == 1 for s in by_key.values())
    assert 0.1 < sum(s == {"val"} for s in by_key.values()) / len(by_key) < 0.5
    assert assign_splits(variants, seed=0, val_fraction=0.3) == split  # deterministic
    assert "val" in assign_splits(variants[:6], seed=0, val_fraction=0.01).values()  # tiny sets still get a val


def test_prompt_length_is_measured_with_the_rows_tools_and_long_rows_dropped(store_path, envs, tiny_tokenizer):
    store = EnvStore.open(store_path)
    measured = export_rows(store, config=ExportConfig(val_fraction=0), tokenizer=tiny_tokenizer, progress=False)
    lengths = {json.loads(r["extra_info"]["astra"])["env_id"]: json.loads(r["extra_info"]["astra"])["prompt_tokens"]
               for r in measured.train}  # fmt: skip
    env = envs[0]
    expected = count_prompt_tokens(tiny_tokenizer, messages_for(env, ExportConfig().system_prompt),
                                   [t.openai_schema() for t in env.tools])  # fmt: skip
    assert lengths[env.id] == expected

    limit = sorted(lengths.values())[len(lengths) // 2]
    cfg = ExportConfig(val_fraction=0, max_prompt_length=limit)
    cut = export_rows(store, config=cfg, tokenizer=tiny_tokenizer, progress=False)
    kept = {json.loads(r["extra_info"]["astra"])["env_id"] for r in cut.train}
    assert {d.env_id for d in cut.dropped} == {i for i, n in lengths.items() if n > limit}
    assert kept == {i for i, n in lengths.items() if n <= limit}
    assert all(d.prompt_tokens > limit for d in cut.dropped)

    # The row's actual tools count: a distractor makes the same prompt longer.
    other = next(e for e in envs if e.domain != env.domain)

    def one_distractor(e, seed):
        own = [ToolRef(e.id, t.name) for t in e.tools]
        extra = [ToolRef(other.id, t.name, True) for t in other.tools if t.name not in {r.name for r in own}]
        return own + extra[:1]

    mixed = export_rows(store, [env], config=ExportConfig(val_fraction=0), mixer=one_distractor,
                        tokenizer=tiny_tokenizer, progress=False)  # fmt: skip
    info = RowInfo.from_extra_info(mixed.train[0]["extra_info"])
    assert info.prompt_tokens > lengths[env.id] and sum(r.distractor for r in info.tools) == 1
    assert len(tool_schemas(env, info.tools, store)) == len(env.tools) + 1
    with pytest.raises(ExportError, match="needs a tokenizer"):
        export_rows(store, config=ExportConfig(max_prompt_length=10), progress=False)


def test_bad_mixer_output_is_refused(store_path, envs):
    store = EnvStore.open(store_path)
    env, other = envs[0], envs[1]
    cases = {
        "exactly once": lambda e, s: [ToolRef(e.id, t.name) for t in e.tools][1:] or [],
        "unique": lambda e, s: [ToolRef(e.id, t.name) for t in e.tools] + [ToolRef(other.id, e.tools[0].name, True)],
        "distractors, and only they": lambda e, s: [ToolRef(e.id, t.name, True) for t in e.tools],
        "not in the store": lambda e, s: [ToolRef(e.id, t.name) for t in e.tools] + [ToolRef("f" * 32, "x", True)],
    }
    for message, mixer in cases.items():
        with pytest.raises(ExportError, match=message):
            export_rows(store, [env], mixer=mixer, progress=False)


def test_random_mixing_with_the_rollout_mixer(tmp_path, store_path):
    from env_registry.mixing import build_mixer

    store = EnvStore.open(store_path)
    mixer = build_mixer(store, "random", seed=1, cache_dir=tmp_path / "mix")
    result = export_rows(store, config=ExportConfig(mixing_mode="random", seed=1), mixer=mixer, progress=False)
    for row in result.train + result.val:
        info = RowInfo.from_extra_info(row["extra_info"])
        env = store.get(info.env_id)
        distractors = [r for r in info.tools if r.distractor]
        assert 5 <= len(distractors) <= 9
        assert all(store.get(r.env_id).domain != env.domain for r in distractors)
        assert info.mixing["mode"] == "random"
    folder = write_export(result, tmp_path / "out", ExportConfig(mixing_mode="random"), {})
    assert folder.name == "mix_random" and pq.read_table(folder / "train.parquet").num_rows == len(result.train)


def test_empty_split_keeps_the_columns(tmp_path, store_path):
    store = EnvStore.open(store_path)
    cfg = ExportConfig(val_fraction=0)
    folder = write_export(export_rows(store, config=cfg, progress=False), tmp_path, cfg, {})
    val = pq.read_table(folder / "val.parquet")
    assert val.num_rows == 0 and "extra_info" in val.column_names
