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

Where a row's environment comes from. A self-contained row (the default export) carries its
environment's spec (`env`) and the schema and code of each distractor it shows (`distractors`),
so it resolves on any node from the row alone: a dataset copied to another folder, cluster or
object store keeps working, as verl's own datasets do. A store-referencing row (`store`, an
absolute path; `export-parquet --rows store`, and every version-1 row) is a tenth of the size
but needs that store at that path on every node. docs/environments.md gives the measurements
(`bench/row_portability.py`) behind the default.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, model_validator

from astra_foundation.strict import SettingsError, StrictModel
from env_registry.spec import EnvSpec, ToolSpec
from env_registry.store import EnvStore

# Version 3: the system prompt states the answer channel and the answer type, and the reward
# target carries the type (issue 48). Rows of versions 1 and 2 asked for a free-text answer the
# reward no longer reads, so they are refused, with the re-export named (`from_extra_info`).
ROW_VERSION = 3
READABLE_VERSIONS = (3,)
_BEFORE_THE_CHANNEL = (1, 2)
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
    # the episode's tools, in the order the prompt shows them (already shuffled); a list or a tuple
    tools: list[ToolRef]
    # where the specs come from: a store location the loop opens (`store`), or the row itself
    store: str | None = None
    env: dict[str, Any] | None = None  # the environment's EnvSpec, as `model_dump(mode="json")`
    # "<env_id>/<tool name>" -> the distractor's name, description, parameters and source
    distractors: dict[str, dict[str, Any]] = Field(default_factory=dict)
    mixing: dict[str, Any] = Field(default_factory=dict)  # {"mode": ..., "seed": ...} as exported
    prompt_tokens: int | None = None  # prompt length with these tools, when a tokenizer was given
    version: int = ROW_VERSION

    @model_validator(mode="after")
    def _one_source(self) -> RowInfo:
        if (self.store is None) == (self.env is None):
            raise ValueError(
                "a row names its environment's source once: either `store` (a store location) or `env` "
                f"(the spec itself); this one has {'both' if self.env is not None else 'neither'}"
            )
        return self

    @property
    def self_contained(self) -> bool:
        return self.env is not None

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
        if d.get("version") in _BEFORE_THE_CHANNEL:
            raise RowError(
                f"row of environment {d.get('env_id')!r} is of version {d.get('version')}, exported before the answer "
                "channel: its prompt does not ask for `<answer>...</answer>`, the only part of a final answer the "
                "reward reads; re-export the rows with `python -m env_registry export-parquet`"
            )
        if d.get("version") not in READABLE_VERSIONS:
            raise RowError(
                f"extra_info.astra.version is {d.get('version')!r}; this reader knows {list(READABLE_VERSIONS)}"
            )
        try:
            return cls(**d)
        except SettingsError as exc:
            raise RowError(f"{exc} (row of env {d.get('env_id')!r}); re-export the rows") from exc


# -- self-contained rows ---------------------------------------------------------------------
def distractor_key(ref: ToolRef) -> str:
    return f"{ref.env_id}/{ref.name}"


def compact_tool(tool: ToolSpec) -> dict[str, Any]:
    """What an episode needs of a distractor: its schema and code (golden calls and call keys
    only matter for the row's own tools, which the reward checks)."""
    return tool.model_dump(mode="json", include={"name", "description", "parameters", "source"})


def embedded_spec(row: RowInfo) -> EnvSpec:
    """The row's own environment, checked against its id (the content hash): a row whose spec was
    edited after export would otherwise train on one environment under another's name."""
    try:
        spec = EnvSpec.model_validate(row.env)
    except ValidationError as exc:
        raise RowError(f"row of environment {row.env_id}: extra_info.astra.env is not a valid spec: {exc}") from exc
    if spec.content_hash() != row.env_id:
        raise RowError(
            f"row of environment {row.env_id}: the spec it carries hashes to {spec.content_hash()} "
            "(edited after export?); re-export the rows"
        )
    return spec


def embedded_tool(row: RowInfo, ref: ToolRef) -> ToolSpec:
    """A distractor the row carries."""
    raw = row.distractors.get(distractor_key(ref))
    if raw is None:
        raise RowError(
            f"row of environment {row.env_id} does not carry tool {ref.name!r} of environment {ref.env_id} "
            f"(it carries {sorted(row.distractors)}); re-export the rows"
        )
    try:
        return ToolSpec.model_validate(raw)
    except ValidationError as exc:
        raise RowError(
            f"row of environment {row.env_id}: distractor {distractor_key(ref)} is malformed: {exc}"
        ) from exc


def row_env(info: RowInfo, stores: dict[str, Any]) -> EnvSpec:
    """The row's environment wherever it comes from; `stores` keeps each store opened once."""
    if info.self_contained:
        return embedded_spec(info)
    return _store(info.store, stores).get(info.env_id)


def row_tool(info: RowInfo, ref: ToolRef, stores: dict[str, Any], env: EnvSpec) -> ToolSpec:
    """One of the row's tools: its own environment's (`env`), carried, or from its store."""
    if ref.env_id == env.id:
        return env.tool(ref.name)
    if info.self_contained:
        return embedded_tool(info, ref)
    return _store(info.store, stores).get(ref.env_id).tool(ref.name)


def _store(location: str | None, stores: dict[str, Any]) -> Any:
    if location not in stores:
        stores[location] = EnvStore.open(location, "r")
    return stores[location]
