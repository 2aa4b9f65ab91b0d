"""`export-parquet --user-base-url URL --user-model NAME` (issue 49): the missing-value rows carry the
LLM user's hook configuration (`llm_user_turns`, the scripted turns plus the endpoint and the facts
the user holds); no other row does, and without the flags the rows keep the scripted user."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from env_registry.cli import main
from env_registry.families.procedural import generate
from env_registry.store import EnvStore
from env_registry.variants import VariantShares

USER_KEYS = ("user_base_url", "user_model", "user_question", "user_missing", "user_value")
URL = "http://127.0.0.1:8001/v1"


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory):
    envs = generate(40, seed=4, variants=VariantShares.parse("mix"))
    path = tmp_path_factory.mktemp("mixed") / "envs"
    with EnvStore.open(path, "a") as s:
        s.add_many(envs)
    return path, {e.id: e for e in envs}


def _rows(folder) -> list[dict]:
    rows = []
    for split in ("train", "val"):
        rows += pq.read_table(folder / "mix_none" / f"{split}.parquet").to_pylist()
    return rows


def _env_id(row: dict) -> str:
    return json.loads(row["extra_info"]["astra"])["env_id"]


def test_the_flags_write_the_llm_user_into_the_missing_value_rows_only(tmp_path, capsys, mixed_store):
    path, envs = mixed_store
    argv = ["--store", str(path), "-q", "export-parquet", "--out", str(tmp_path)]
    assert main([*argv, "--user-base-url", URL, "--user-model", "user-model"]) == 0
    assert "missing_value rows' user: llm:user-model" in capsys.readouterr().out
    rows = _rows(tmp_path)
    missing = [r for r in rows if envs[_env_id(r)].variant.value == "missing_value"]
    assert missing and len(missing) < len(rows)
    for row in rows:
        kwargs, env = row["extra_info"]["interaction_kwargs"], envs[_env_id(row)]
        if env.variant.value != "missing_value":
            assert kwargs["name"] == "astra_default"
            assert all(kwargs.get(k) is None for k in USER_KEYS)  # the parquet's shared columns read null
            continue
        assert kwargs["name"] == "llm_user_turns"
        assert kwargs["turns"] == env.user.turns() and kwargs["otherwise"] == env.user.otherwise  # when: scripted
        assert [kwargs[k] for k in USER_KEYS] == [URL, "user-model", env.question, env.user.missing, env.user.value]


def test_without_the_flags_the_missing_value_rows_keep_the_scripted_user(tmp_path, mixed_store):
    path, envs = mixed_store
    assert main(["--store", str(path), "-q", "export-parquet", "--out", str(tmp_path)]) == 0
    rows = _rows(tmp_path)
    names = {envs[_env_id(r)].variant.value: r["extra_info"]["interaction_kwargs"]["name"] for r in rows}
    assert names["missing_value"] == "scripted_user_turns" and names["answerable"] == "astra_default"
    assert not any(r["extra_info"]["interaction_kwargs"].get(k) for r in rows for k in USER_KEYS)


@pytest.mark.parametrize("flags", [["--user-base-url", URL], ["--user-model", "user-model"]])
def test_one_flag_without_the_other_is_refused(tmp_path, capsys, mixed_store, flags):
    path, _ = mixed_store
    assert main(["--store", str(path), "-q", "export-parquet", "--out", str(tmp_path), *flags]) == 2
    assert "needs both --user-base-url and --user-model" in capsys.readouterr().err
    assert not (tmp_path / "mix_none").exists()
