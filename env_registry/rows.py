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
from dataclasses import asdict, dataclass, field
from typing import Any

ROW_VERSION = 1
AGENT_NAME = "astra_tool_agent"


class RowError(ValueError):
    """A row's `extra_info.astra` is missing or malformed."""


@dataclass(frozen=True)
class ToolRef:
    env_id: str  # environment whose tool this is (the row's own env, or another for a distractor)
    name: str
    distractor: bool = False


@dataclass
class RowInfo:
    env_id: str
    store: str  # env_registry store location the loop opens to fetch specs
    tools: list[ToolRef]  # the episode's tools, in the order the prompt shows them (already shuffled)
    mixing: dict[str, Any] = field(default_factory=dict)  # {"mode": ..., "seed": ...} as exported
    prompt_tokens: int | None = None  # prompt length with these tools, when a tokenizer was given
    version: int = ROW_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

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
        if d.get("version") != ROW_VERSION:
            raise RowError(f"extra_info.astra.version is {d.get('version')!r}; this reader knows {ROW_VERSION}")
        try:
            return cls(
                env_id=d["env_id"],
                store=d["store"],
                tools=[ToolRef(**t) for t in d["tools"]],
                mixing=d.get("mixing") or {},
                prompt_tokens=d.get("prompt_tokens"),
            )
        except (KeyError, TypeError) as exc:
            raise RowError(f"extra_info.astra is malformed ({exc}) in row for env {d.get('env_id')!r}") from exc
