"""An exported dataset works wherever it is copied: self-contained rows resolve their environment,
their distractors and their reward from the parquet alone, with the store deleted and the folder
moved (as on a node that never saw the store); a store-referencing row says which path it needs.

The episode runs the rollout's path (`astra_tool_agent`, tools in the sandbox, a scripted server)
and is scored by the reward from the row's `reward_model`; the GRPO step from a moved dataset is
tests/training_cpu (its `procedural_envs` fixture moves the export and deletes the store)."""

from __future__ import annotations

import json
import shutil

import pyarrow.parquet as pq
import pytest

from astra_verl.calls.call_log import EpisodeLog
from astra_verl.eval.envs import episode_kwargs
from astra_verl.reward.f1 import score_episode
from astra_verl.rollout.testing import ScriptedServer, make_loop, run
from env_registry.call_gate import CallStatus
from env_registry.export import ExportConfig, export_rows, write_export
from env_registry.rows import RowError, RowInfo, ToolRef, embedded_spec
from env_registry.spec import RewardTarget
from env_registry.store import EnvStore


def export_and_move(envs, kit, tmp_path, rows: str):
    """Export the city environment with one distractor (the weather environment's forecast) as
    `rows`, move the export to another folder and delete the store: (the parquet row, weather id)."""
    city, weather = envs.city, envs.weather

    def mixer(env, seed):
        return [ToolRef(env.id, t.name) for t in env.tools] + [ToolRef(weather.id, "get_forecast", True)]

    store_dir = kit.write_store(tmp_path / "origin" / "store", [city, weather])
    cfg = ExportConfig(val_fraction=0, rows=rows)
    result = export_rows(EnvStore.open(store_dir), [city], config=cfg, mixer=mixer, progress=False)
    folder = write_export(result, tmp_path / "origin" / "out", cfg, {})
    moved = tmp_path / "elsewhere" / "data"
    shutil.move(folder, moved)
    shutil.rmtree(tmp_path / "origin")
    return pq.read_table(moved / "train.parquet").to_pylist()[0], weather.id


@pytest.fixture(scope="module")
def cfg(trainer_config):
    return trainer_config()


def test_a_moved_self_contained_row_runs_and_is_scored_without_its_store(cfg, tiny_tokenizer, envs, kit, tmp_path):
    row, weather_id = export_and_move(envs, kit, tmp_path, "self-contained")
    info = RowInfo.from_extra_info(row["extra_info"])
    assert info.store is None and set(info.distractors) == {f"{weather_id}/get_forecast"}
    script = [
        kit.call_text("get_population", {"city": "Paris"}) + kit.call_text("get_area", {"city": "Paris"}),
        kit.call_text("get_forecast", {"city": "Paris"}),
        "The density is about 20503 people per km2. <answer>20503</answer>",
    ]
    server = ScriptedServer(tiny_tokenizer, script)
    out = run(make_loop(cfg, server, tiny_tokenizer).run({"temperature": 1.0}, **episode_kwargs(row)))
    log = EpisodeLog.from_extra_fields(out.extra_fields)
    assert [(c.tool, c.status, c.distractor) for c in log.calls] == [
        ("get_population", CallStatus.OK, False),
        ("get_area", CallStatus.OK, False),
        ("get_forecast", CallStatus.OK, True),  # the distractor's code came from the row, ran in the sandbox
    ]
    assert '"forecast": "rain"' in log.calls[2].output
    target = RewardTarget.model_validate_json(row["reward_model"]["ground_truth"])
    score = score_episode(log, target)
    assert (score.solved, score.n, score.calls, score.distractor_calls) == (3, 3, 3, 1)
    assert score.reward == pytest.approx(1.0)


def test_an_edited_spec_in_a_row_is_refused(envs, kit, tmp_path):
    row, _ = export_and_move(envs, kit, tmp_path, "self-contained")
    info = RowInfo.from_extra_info(row["extra_info"])
    edited = info.model_copy(update={"env": {**info.env, "final_answer": "42"}})
    with pytest.raises(RowError, match="hashes to .* re-export"):
        embedded_spec(edited)


def test_a_moved_store_referencing_row_names_the_missing_store(cfg, tiny_tokenizer, envs, kit, tmp_path):
    row, _ = export_and_move(envs, kit, tmp_path, "store")
    info = RowInfo.from_extra_info(row["extra_info"])
    assert info.store == str((tmp_path / "origin" / "store").resolve()) and info.env is None
    server = ScriptedServer(tiny_tokenizer, ["no calls"])
    with pytest.raises(FileNotFoundError, match="origin/store.*absolute path.*--rows self-contained"):
        run(make_loop(cfg, server, tiny_tokenizer).run({"temperature": 1.0}, **episode_kwargs(row)))


def test_a_row_names_one_source_and_rows_before_the_answer_channel_are_refused(envs):
    city = envs.city
    tools = [ToolRef(city.id, t.name) for t in city.tools]
    with pytest.raises(ValueError, match="has neither"):
        RowInfo(env_id=city.id, tools=tools)
    with pytest.raises(ValueError, match="has both"):
        RowInfo(env_id=city.id, tools=tools, store="/s", env=city.model_dump(mode="json"))
    v3 = {"env_id": city.id, "store": "/s", "tools": [t.model_dump() for t in tools], "version": 3}
    assert RowInfo.from_extra_info({"astra": json.dumps(v3)}).store == "/s"
    for old in (1, 2):  # exported before the answer channel (issue 48)
        with pytest.raises(RowError, match="before the answer channel.*re-export the rows.*export-parquet"):
            RowInfo.from_extra_info({"astra": json.dumps({**v3, "version": old})})
    with pytest.raises(RowError, match="this reader knows \\[3\\]"):
        RowInfo.from_extra_info({"astra": json.dumps({**v3, "version": 4})})
