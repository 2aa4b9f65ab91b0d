"""Golden demonstrations with recovery (env_registry/golden_sft.py): a share of them shows a failed call,
the message astra_tool_agent gives for it (checked against the loop's own parser, toolset and sandbox),
and the corrected call; the failed turn is context only in verl's SFT dataset."""

from __future__ import annotations

import asyncio
import json

import pandas as pd
import pytest

from astra_foundation.sandbox import SandboxPool
from astra_foundation.strict import SettingsError
from astra_verl.rollout.tool_parser import HermesReportingParser
from astra_verl.rollout.toolset import ToolCatalog
from env_registry.export import ExportConfig, export_rows, write_export
from env_registry.golden_sft import GoldenSFTError, NoTool, Recovery, golden_rows, write_golden_sft
from env_registry.rows import RowInfo
from env_registry.store import EnvStore


@pytest.fixture(scope="module")
def rl_parquet(tmp_path_factory, store_path):
    cfg = ExportConfig(val_fraction=0)
    result = export_rows(EnvStore.open(store_path), config=cfg, progress=False)
    folder = write_export(result, tmp_path_factory.mktemp("rl"), cfg, {})
    return folder / "train.parquet"


@pytest.fixture(scope="module")
def demos(rl_parquet):
    return golden_rows(rl_parquet, Recovery(share=0.25, seed=3))


def attempt_of(row: dict) -> tuple[str, str]:
    """The failed attempt's assistant text (as the model writes it) and the tool message after it."""
    i = next(i for i, m in enumerate(row["messages"]) if m.get("weight") == 0)
    message, tool = row["messages"][i], row["messages"][i + 1]
    if message.get("tool_calls"):
        fn = message["tool_calls"][0]["function"]
        text = '<tool_call>\n{"name": "' + fn["name"] + '", "arguments": ' + fn["arguments"] + "}\n</tool_call>"
    else:
        text = message["content"]
    return text, tool["content"]


def test_a_share_of_the_rows_shows_each_kind_of_failure_then_the_fix(demos, rl_parquet):
    rows, summary = demos
    n = len(pd.read_parquet(rl_parquet))
    recovering = [r for r in rows if r["recovery"]]
    assert len(recovering) == round(0.25 * n) == sum(summary.recovery.values())
    assert set(summary.recovery) == {"wrong_argument", "unknown_tool", "malformed"}
    for row in recovering:
        messages = row["messages"]
        i = next(i for i, m in enumerate(messages) if m.get("weight") == 0)
        assert messages[i + 1]["role"] == "tool" and messages[i + 1]["content"].startswith("Error (")
        fix = messages[i + 2]["tool_calls"][0]["function"]  # the corrected call follows at once
        assert not messages[i + 3]["content"].startswith("Error (")  # ... and succeeds
        assert fix["name"] in [t["function"]["name"] for t in json.loads(row["tools"])]
    plain = [r for r in rows if not r["recovery"]]
    assert all(not m.get("weight", 1) == 0 for r in plain for m in r["messages"])
    again, _ = golden_rows(rl_parquet, Recovery(share=0.25, seed=3))
    assert again == rows  # the same seed writes the same data
    none, summary = golden_rows(rl_parquet, Recovery(share=0.0))
    assert not any(r["recovery"] for r in none) and not summary.recovery


def test_the_error_each_failed_attempt_shows_is_the_one_astra_tool_agent_gives(demos, rl_parquet):
    rows, _ = demos
    rl = {RowInfo.from_extra_info(r["extra_info"]).env_id: r for r in pd.read_parquet(rl_parquet).to_dict("records")}
    parser = HermesReportingParser(None)
    catalog = ToolCatalog()

    async def loop_messages(attempts: list[tuple[dict, str]]) -> list[str]:
        """Each attempt parsed by the loop's parser and run by its toolset in a fresh sandbox session."""
        out = []
        async with SandboxPool() as pool:
            for rl_row, text in attempts:
                toolset = catalog.toolset(RowInfo.from_extra_info(rl_row["extra_info"]))
                session = await pool.open_session(toolset.program)

                async def opened(session=session):
                    return session

                call = parser.parse_text(text).calls[0]
                record = await toolset.execute(call, toolset.initially_shown, pool, opened, turn=1, index=0)
                await pool.close_session(session)
                out.append(record.output)
        return out

    recovering = [r for r in rows if r["recovery"]]
    attempts = [attempt_of(r) for r in recovering]
    got = asyncio.run(
        loop_messages([(rl[r["env_id"]], text) for r, (text, _) in zip(recovering, attempts, strict=True)])
    )
    for row, (text, shown), loop in zip(recovering, attempts, got, strict=True):
        assert loop == shown, (row["recovery"], text)


def test_the_failed_turn_is_context_not_a_target_in_verls_sft_dataset(tmp_path, rl_parquet, tiny_tokenizer):
    from astra_verl.training.sft_dataset import TrajSFTDataset

    path = tmp_path / "sft.parquet"
    summary = write_golden_sft(rl_parquet, path, Recovery(share=1.0, kinds=("malformed",)))
    assert summary.recovery == {"malformed": summary.rows}
    dataset = TrajSFTDataset(str(path), tiny_tokenizer, {"max_length": 4096})
    item = dataset[0]
    live = item["attention_mask"].bool()
    ids, loss = item["input_ids"][live], item["loss_mask"][live].bool()
    trained, context = tiny_tokenizer.decode(ids[loss]), tiny_tokenizer.decode(ids[~loss])
    assert "Malformed tool call" in context and "Malformed tool call" not in trained
    bad = pd.read_parquet(path).iloc[0]["messages"]
    broken = next(m["content"] for m in bad if m.get("weight") == 0)
    assert broken in context and broken not in trained  # the mistake is shown, never learned
    assert "<tool_call>" in trained  # the corrected calls are learned


def test_bad_recovery_settings_are_refused():
    with pytest.raises(SettingsError, match="share"):
        Recovery(share=1.5)
    with pytest.raises(SettingsError, match="kinds"):
        Recovery(kinds=("typo",))
    with pytest.raises(SettingsError, match="unknown keys"):
        Recovery(shares=0.2)


def test_no_tool_twins_show_only_other_domains_tools_and_make_no_call(rl_parquet, envs):
    golden, _ = golden_rows(rl_parquet, Recovery(share=0))
    rows, summary = golden_rows(rl_parquet, Recovery(share=0), no_tool=NoTool(share=0.5, seed=1))
    assert rows[: len(golden)] == golden  # the golden rows are untouched; the twins come after
    twins = rows[len(golden) :]
    assert len(twins) == summary.irrelevant_tools == round(0.5 * len(golden)) > 0
    by_id = {e.id: e for e in envs}
    domain_of = {t.name: e.domain for e in envs for t in e.tools}
    for twin in twins:
        env = by_id[twin["env_id"]]
        shown = [t["function"]["name"] for t in json.loads(twin["tools"])]
        assert shown and not set(shown) & {t.name for t in env.tools}
        assert all(domain_of[n] != env.domain for n in shown)
        reply = twin["messages"][-1]
        assert twin["irrelevant_tools"] and reply["role"] == "assistant" and not reply.get("tool_calls")
        assert twin["variant"] == env.variant.value == "answerable"  # the environment's, not the twin's behaviour
        assert all(n in reply["content"] for n in shown) and "<tool_call>" not in reply["content"]
        original = next(r for r in golden if r["env_id"] == env.id)
        assert twin["messages"][:-1] == original["messages"][: len(twin["messages"]) - 1]  # the same prompt
    again, _ = golden_rows(rl_parquet, Recovery(share=0), no_tool=NoTool(share=0.5, seed=1))
    assert again == rows  # a rerun writes the same data


def test_a_no_tool_twin_trains_the_reply_without_a_call(tmp_path, rl_parquet, tiny_tokenizer):
    from astra_verl.training.sft_dataset import TrajSFTDataset

    path = tmp_path / "sft.parquet"
    summary = write_golden_sft(rl_parquet, path, Recovery(share=0), no_tool=NoTool(share=1.0))
    table = pd.read_parquet(path)
    assert summary.irrelevant_tools == summary.rows and len(table) == 2 * summary.rows
    dataset = TrajSFTDataset(str(path), tiny_tokenizer, {"max_length": 4096})
    item = dataset[summary.rows]  # the first twin
    live = item["attention_mask"].bool()
    trained = tiny_tokenizer.decode(item["input_ids"][live][item["loss_mask"][live].bool()])
    assert "None of the tools I have" in trained and "<tool_call>" not in trained


def test_no_tool_twins_need_another_domain(tmp_path, envs):
    one_domain = [e for e in envs if e.domain == envs[0].domain]
    with EnvStore.open(tmp_path / "s", "a") as s:
        s.add_many(one_domain)
    cfg = ExportConfig(val_fraction=0)
    folder = write_export(
        export_rows(EnvStore.open(tmp_path / "s"), config=cfg, progress=False), tmp_path / "rl", cfg, {}
    )
    with pytest.raises(GoldenSFTError, match="another domain"):
        golden_rows(folder / "train.parquet", Recovery(share=0), no_tool=NoTool(share=1.0))
    with pytest.raises(SettingsError, match="share"):
        NoTool(share=-0.1)
