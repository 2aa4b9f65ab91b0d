"""The contract between an exported verl row and `astra_tool_agent`.

`env_registry.export` writes rows; the agent loop reads `extra_info["astra"]` with
`RowInfo.from_extra_info`. The record is stored as a JSON string: parquet would otherwise
unify the nested dicts of all rows into one struct type and fill absent keys with nulls.

A row (one RLHFDataset sample):
    data_source   "astra/<domain>"
    prompt        [{"role": "system", ...}?, {"role": "user", "content": question}]
    ability       "tool_use"
    agent_name    "astra_tool_agent"
    reward_model  {"style": "rule", "ground_truth": RewardTarget JSON}
    extra_info    {"index": int, "split": str, "astra": RowInfo JSON,
                   "interaction_kwargs": {"name": hook name, ...}}
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ConfigDict, Field

from astra_verl.strict import SettingsError, StrictModel

ROW_VERSION = 1
AGENT_NAME = "astra_tool_agent"


class RowError(ValueError):
    """A row's `extra_info.astra` is missing or malformed."""


class ToolRef(StrictModel):
    """One tool an episode shows or may show: `ToolRef(env_id, name, distractor=False)`."""

    model_config = ConfigDict(strict=False)  # read back from JSON with its row

    env_id: str  # environment whose tool this is (the row's own env, or another for a distractor)
    name: str
    distractor: bool = False

    def __init__(self, *args: Any, **data: Any) -> None:
        if len(args) > 3:
            raise TypeError(f"ToolRef takes env_id, name and distractor, got {len(args)} positional arguments")
        super().__init__(**dict(zip(("env_id", "name", "distractor"), args, strict=False)), **data)


class RowInfo(StrictModel):
    """`extra_info.astra`: the environment, its store and the tools the prompt shows (persisted, versioned)."""

    model_config = ConfigDict(strict=False)  # read back from JSON: lists for sequences
    section = "extra_info.astra"

    env_id: str
    store: str  # env_registry store location the loop opens to fetch specs
    # the episode's tools, in the order the prompt shows them (already shuffled); a list or a tuple
    tools: list[ToolRef]
    mixing: dict[str, Any] = Field(default_factory=dict)  # {"mode": ..., "seed": ...} as exported
    prompt_tokens: int | None = None  # prompt length with these tools, when a tokenizer was given
    version: int = ROW_VERSION

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json"), sort_keys=True)

    @classmethod
    def from_extra_info(cls, extra_info: Any) -> RowInfo:
        if not isinstance(extra_info, dict) or "astra" not in extra_info:
            raise RowError(
                "row has no extra_info.astra: it was not exported by `python -m env_registry export-parquet`"
            )
        raw = extra_info["astra"]
        try:
            d = json.loads(raw) if isinstance(raw, str | bytes) else dict(raw)
        except (TypeError, ValueError) as exc:
            raise RowError(f"extra_info.astra is not a JSON object: {exc}") from exc
        if not isinstance(d, dict):
            raise RowError(f"extra_info.astra is not a JSON object (got {type(d).__name__})")
        if d.get("version") != ROW_VERSION:
            raise RowError(f"extra_info.astra.version is {d.get('version')!r}; this reader knows {ROW_VERSION}")
        try:
            return cls(**d)
        except SettingsError as exc:
            raise RowError(f"{exc} (row of env {d.get('env_id')!r}); re-export the rows") from exc
