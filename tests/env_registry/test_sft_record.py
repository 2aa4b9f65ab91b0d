"""One SFT row for the three writers (issue 46): golden demonstrations (`env_registry.golden_sft`),
`data_synth traj export` (`export_sft`) and `data_synth traj import-astra` (`astra_import`) build
their rows as `env_registry.sft_record.SFTRecord`, with its one version."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from astra_foundation.strict import SettingsError
from data_synth.traj import astra_import, export_sft
from data_synth.traj.records import JudgedTrajectory, Judgement, Task, Trajectory
from env_registry import golden_sft
from env_registry.importers.sources import SourceRow
from env_registry.sft_record import SFT_VERSION, SFTRecord
from env_registry.spec import Variant

ROOT = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {"name": "ls", "description": "List", "parameters": {"type": "object"}}}]
CALL = {"id": "call_0", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
MESSAGES = [
    {"role": "user", "content": "List it."},
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "content": "a.txt", "tool_call_id": "call_0", "name": "ls"},
    {"role": "assistant", "content": "a.txt"},
]


def _golden() -> dict:
    return golden_sft.sft_row(MESSAGES, TOOLS, "env-1", Variant.ANSWERABLE, recovery="malformed")


def _exported() -> dict:
    task = Task.create(server_id="fs", source="chain", tools=["ls"], query="List it.", prompt="p@v1")
    traj = Trajectory(
        key="t1", task=task, server_id="fs", messages=MESSAGES, tools=TOOLS, calls=[], llm_calls=2,
        backend="simulated", final_answer="a.txt",
    )  # fmt: skip
    judged = JudgedTrajectory(key="t1", trajectory=traj, judgement=Judgement(scores={"a": 1.0}, score=1.0))
    return export_sft.sft_row(judged, export_sft.SFTExportConfig())


def _imported() -> dict:
    conv = astra_import.Conversation("openai", messages=MESSAGES, tools=TOOLS, server="fs")
    return astra_import.sft_row(conv, SourceRow(file="in.jsonl", where={"line": 1}, data={}))


@pytest.mark.parametrize("build", [_golden, _exported, _imported], ids=["golden", "traj export", "import-astra"])
def test_every_writer_builds_the_one_record_with_the_one_version(build):
    row = build()
    assert row["sft_version"] == SFT_VERSION
    assert list(row) == list(SFTRecord.model_fields)  # the same columns, in the same order, whoever wrote it
    assert SFTRecord(**row).row() == row  # the row reads back as the record it was built from
    assert json.loads(row["tools"]) == TOOLS and row["num_tool_calls"] == 1
    assert row["messages"] == MESSAGES  # each message keeps only the keys it has


def test_the_writers_fill_their_own_columns():
    golden, exported, imported = _golden(), _exported(), _imported()
    assert (golden["env_id"], golden["recovery"], golden["server_id"]) == ("env-1", "malformed", None)
    assert (exported["server_id"], exported["score"], exported["env_id"]) == ("fs", 1.0, None)
    assert (imported["source"], imported["score"]) == ("openai:in.jsonl:1", None)
    # one word, one meaning (sft_version 6): `variant` is the environment's, golden's only; the
    # trajectory task's augmentation mode is `augmentation`; a twin is `irrelevant_tools`
    assert (golden["variant"], golden["augmentation"], golden["irrelevant_tools"]) == ("answerable", None, False)
    assert (exported["variant"], exported["augmentation"]) == (None, "base")
    assert (imported["variant"], imported["augmentation"]) == (None, None)


@pytest.mark.parametrize("value", ["imported", "diverse"])
def test_variant_is_only_an_environments_variant(value):
    with pytest.raises(SettingsError, match=rf"SFT row.variant must be one of 'answerable', .*, got '{value}'"):
        SFTRecord(**{**_golden(), "variant": value})


def test_a_task_written_when_augmentation_was_called_variant_still_reads_with_its_key():
    """`Task.variant` became `augmentation` without a record version bump: the value and the key are
    the same, so a validation alias reads the old records and run folders stay resumable."""
    new = Task.create(
        server_id="fs", source="chain", tools=["ls"], query="List it.", prompt="p@v1", augmentation="persona"
    )
    old = {k: v for k, v in new.model_dump(mode="json").items() if k != "augmentation"} | {"variant": "persona"}
    assert Task.model_validate(old) == new
    assert "augmentation" in new.model_dump() and "variant" not in new.model_dump()
    with pytest.raises(ValidationError, match="variant"):  # both names at once: the old one is an unknown key
        Task.model_validate({**old, "augmentation": "persona"})


def test_unknown_columns_and_message_keys_are_refused():
    with pytest.raises(SettingsError, match=r"unknown keys \['extra'\]"):
        SFTRecord(**_golden(), extra=1)
    with pytest.raises(SettingsError, match=rf"SFT row.sft_version must be one of {SFT_VERSION}, got 4"):
        SFTRecord(**{**_golden(), "sft_version": 4})


def test_a_writer_that_builds_a_bad_row_is_named_with_the_conversation():
    bad = [*MESSAGES[:-1], {"role": "assistant", "content": "a.txt", "weight": 2}]
    with pytest.raises(SettingsError, match=r"golden demonstration of environment env-1: .*weight.*a writer's bug"):
        golden_sft.sft_row(bad, TOOLS, "env-1", Variant.ANSWERABLE)


def test_there_is_one_sft_version_constant():
    """The version lives in the record only: no writer keeps a version of its own."""
    owners = []
    for package in ("astra_verl", "env_registry", "data_synth"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SFT_VERSION" for t in node.targets):
                    owners.append(str(path.relative_to(ROOT)))
    assert owners == ["env_registry/sft_record.py"]
