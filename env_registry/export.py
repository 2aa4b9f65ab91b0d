"""Export a store to the parquet rows verl's `RLHFDataset` reads (the row format is documented
in `env_registry.rows`).

One row per environment:
    data_source   "astra/<domain>"
    prompt        [{"role": "system", "content": SYSTEM_PROMPT}?, {"role": "user", "content": question}]
    ability       "tool_use"
    agent_name    "astra_tool_agent"
    reward_model  {"style": "rule", "ground_truth": EnvSpec.reward_target() as JSON}
    extra_info    {"index": row number in its split, "split": "train" | "val",
                   "astra": RowInfo JSON, "interaction_kwargs": {"name": <hook>, ...}}

Tools. The prompt carries no tool schemas: the agent loop renders `RowInfo.tools` with the chat
template, resolved from the row itself (`rows="self-contained"`, the default: the environment's
spec and each distractor's schema and code travel in `extra_info.astra`) or through the store
(`rows="store"`: an absolute path every node must see). Which tools a row shows is decided here, once, by a
mixer `(env, seed) -> list[ToolRef]` returning the episode's whole tool list in prompt order:
the environment's own tools and distractors from other environments, already shuffled
(`env_registry.mixing.build_mixer` builds one). Without a mixer a row shows its own tools
in spec order. The export checks the mixer's list: every own tool exactly once, unique names,
distractors only from other environments and present in the store.

Train/val split by content. Rows are grouped by `question_key` (NFKC, case-folded, every run of
digits -> "0", every run of other non-alphanumerics -> one space), and a group goes to val when
sha256("<seed>:<key>") falls below `val_fraction`. Questions that differ only in numbers,
case or punctuation therefore never straddle the split, and a group's split does not change
when the store grows. If val would be empty though `val_fraction > 0` (tiny stores), the group
with the smallest hash goes to val.

Prompt length. With a tokenizer, each row's prompt is measured the way the rollout will see
it: `apply_chat_template(prompt, tools=<the row's own + distractor schemas>,
add_generation_prompt=True)` (verl's own length filter only knows a global tool list). The
count is stored in `RowInfo.prompt_tokens`, and rows over `max_prompt_length` are dropped and
listed in `dropped.jsonl`.

Output: `<out>/mix_<mode>/{train,val}.parquet`, `dropped.jsonl`, `manifest.json`.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field, field_validator
from tqdm.auto import tqdm

from astra_foundation.errors import UserError
from astra_foundation.strict import StrictModel
from env_registry.answer_channel import inferred_type, instruction
from env_registry.rows import AGENT_NAME, ROW_VERSION, RowInfo, ToolRef, compact_tool, distractor_key
from env_registry.spec import EnvSpec
from env_registry.variants import LLMUserConfig, interaction_kwargs

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant with access to tools. Answer the user's question by calling the tools "
    "you need and using their results; do not guess values a tool can provide. When you have the answer, "
    "reply with a short final answer and no tool call."
)  # the answer channel's instruction follows it in every row (`system_content`)
DEFAULT_INTERACTION = "astra_default"
DATA_SOURCE_PREFIX = "astra/"
ABILITY = "tool_use"

Mixer = Callable[[EnvSpec, int], list[ToolRef]]


class ExportError(UserError, ValueError):
    """The export cannot produce a correct row (bad mixer output, inconsistent options)."""


_DIGITS = re.compile(r"\d+")
_NON_ALNUM = re.compile(r"[\W_]+", re.UNICODE)


def question_key(question: str) -> str:
    """The near-duplicate key of a question (see the module docstring)."""
    text = unicodedata.normalize("NFKC", question).casefold()
    text = _DIGITS.sub("0", text)
    return _NON_ALNUM.sub(" ", text).strip()


def _key_hash(key: str, seed: int) -> float:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _row_seed(seed: int, env_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{env_id}".encode()).digest()[:4], "big")


class ExportConfig(StrictModel):
    """How rows are exported (written into the export's manifest)."""

    section = "export config"

    mixing_mode: str = "none"
    seed: int = 0
    val_fraction: float = 0.1
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT
    interaction_kwargs: dict[str, Any] = Field(default_factory=lambda: {"name": DEFAULT_INTERACTION})
    max_prompt_length: int | None = None
    # self-contained: rows carry their specs and resolve anywhere; store: rows name the store's
    # absolute path (a tenth of the size; every node needs that path); env_registry.rows says more
    rows: Literal["self-contained", "store"] = "self-contained"
    # the LLM that words the missing-value rows' user (None: their scripted user; env_registry.variants)
    user: LLMUserConfig | None = None

    @field_validator("val_fraction")
    @classmethod
    def _fraction(cls, value: float) -> float:
        if not 0 <= value < 1:
            raise ValueError(f"must be in [0, 1), got {value}")
        return value

    @field_validator("interaction_kwargs")
    @classmethod
    def _names_a_hook(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "name" not in value:
            raise ValueError("needs a 'name' (the environment-interaction hook)")
        return value


@dataclass(frozen=True)
class DroppedRow:
    env_id: str
    split: str
    prompt_tokens: int
    reason: str


@dataclass
class ExportResult:
    train: list[dict[str, Any]] = field(default_factory=list)
    val: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[DroppedRow] = field(default_factory=list)
    mixing: dict[str, Any] = field(default_factory=dict)
    distractors: int = 0


def system_content(env: EnvSpec, system_prompt: str | None) -> str:
    """The system message of a row: the prompt, then the answer channel and the environment's type.
    The channel's instruction stays without a prompt (`--no-system-prompt`): the reward reads only
    the channel, so a row that does not ask for it cannot be answered."""
    channel_rule = instruction(env.answer_type or inferred_type(env))
    return "\n\n".join(part for part in (system_prompt, channel_rule) if part)


def messages_for(env: EnvSpec, system_prompt: str | None) -> list[dict[str, str]]:
    system = system_content(env, system_prompt)
    msgs = [{"role": "system", "content": system}] if system else []
    return msgs + [{"role": "user", "content": env.question}]


def _check_tools(env: EnvSpec, refs: list[ToolRef], store: Any) -> None:
    names = [r.name for r in refs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ExportError(f"environment {env.id}: the mixer shows several tools named {dupes}; names must be unique")
    for r in refs:
        if r.distractor == (r.env_id == env.id):
            raise ExportError(
                f"environment {env.id}: tool {r.name!r} of {r.env_id} has distractor={r.distractor}; "
                "distractors, and only they, come from other environments"
            )
    own = sorted(r.name for r in refs if r.env_id == env.id and not r.distractor)
    if own != sorted(t.name for t in env.tools):
        raise ExportError(
            f"environment {env.id}: the mixer's list must hold each of its own tools exactly once "
            f"(got {own}, expected {sorted(t.name for t in env.tools)})"
        )
    for r in refs:
        if r.distractor:
            if r.env_id not in store:
                raise ExportError(
                    f"environment {env.id}: distractor {r.name!r} comes from {r.env_id}, not in the store"
                )
            store.get(r.env_id).tool(r.name)  # KeyError names the missing tool


def row_source(kind: str, env: EnvSpec, refs: list[ToolRef], store: Any, location: str) -> dict[str, Any]:
    """RowInfo's source fields: the store's location, or the spec and each distractor's schema and code."""
    if kind == "store":
        return {"store": location}
    distractors = {distractor_key(r): compact_tool(store.get(r.env_id).tool(r.name)) for r in refs if r.distractor}
    return {"env": env.model_dump(mode="json"), "distractors": distractors}


def tool_schemas(env: EnvSpec, refs: list[ToolRef], store: Any) -> list[dict[str, Any]]:
    """OpenAI schemas of a row's tools, in prompt order."""
    return [(env if r.env_id == env.id else store.get(r.env_id)).tool(r.name).openai_schema() for r in refs]


def count_prompt_tokens(tokenizer: Any, messages: list[dict[str, str]], tools: list[dict[str, Any]]) -> int:
    ids = tokenizer.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 may return a BatchEncoding
        ids = ids["input_ids"]
    if ids and isinstance(ids[0], list):
        ids = ids[0]
    return len(ids)


def assign_splits(envs: list[EnvSpec], seed: int, val_fraction: float) -> dict[str, str]:
    """env id -> "train" | "val", by question group (see the module docstring)."""
    keys = {e.id: question_key(e.question) for e in envs}
    hashes = {k: _key_hash(k, seed) for k in set(keys.values())}
    split = {i: ("val" if hashes[k] < val_fraction else "train") for i, k in keys.items()}
    if val_fraction > 0 and len(hashes) > 1 and "val" not in split.values():
        smallest = min(hashes, key=hashes.__getitem__)
        split.update({i: "val" for i, k in keys.items() if k == smallest})
    return split


def export_rows(
    store: Any,
    envs: Iterable[EnvSpec] | None = None,
    *,
    config: ExportConfig | None = None,
    mixer: Mixer | None = None,
    tokenizer: Any = None,
    progress: bool = True,
) -> ExportResult:
    """Rows for `envs` (default: the whole store). `store` resolves distractors and is recorded
    in store-referencing rows (`RowInfo.store`) as an absolute path; self-contained rows carry
    the specs instead (`row_source`)."""
    cfg = config or ExportConfig()
    if cfg.max_prompt_length is not None and tokenizer is None:
        raise ExportError("max_prompt_length needs a tokenizer to measure prompts")
    envs = list(store if envs is None else envs)
    splits = assign_splits(envs, cfg.seed, cfg.val_fraction)
    location = str(Path(store.path).resolve())
    mixing_info = dict(getattr(mixer, "info", None) or {"mode": cfg.mixing_mode, "seed": cfg.seed})
    result = ExportResult(mixing=mixing_info)
    for env in tqdm(envs, desc="export rows", unit="env", disable=not progress):
        split = splits[env.id]
        row_seed = _row_seed(cfg.seed, env.id)
        refs = list(mixer(env, row_seed)) if mixer else [ToolRef(env_id=env.id, name=t.name) for t in env.tools]
        _check_tools(env, refs, store)
        messages = messages_for(env, cfg.system_prompt)
        tokens = None
        if tokenizer is not None:
            tokens = count_prompt_tokens(tokenizer, messages, tool_schemas(env, refs, store))
            if cfg.max_prompt_length is not None and tokens > cfg.max_prompt_length:
                result.dropped.append(DroppedRow(env.id, split, tokens, f"prompt over {cfg.max_prompt_length} tokens"))
                continue
        rows = result.train if split == "train" else result.val
        info = RowInfo(
            env_id=env.id,
            **row_source(cfg.rows, env, refs, store, location),
            tools=refs,
            mixing={**mixing_info, "row_seed": row_seed},
            prompt_tokens=tokens,
        )
        result.distractors += sum(r.distractor for r in refs)
        rows.append(
            {
                "data_source": DATA_SOURCE_PREFIX + env.domain,
                "prompt": messages,
                "ability": ABILITY,
                "agent_name": AGENT_NAME,
                "reward_model": {"style": "rule", "ground_truth": env.reward_target().model_dump_json()},
                "extra_info": {
                    "index": len(rows),
                    "split": split,
                    "astra": info.to_json(),
                    "interaction_kwargs": interaction_kwargs(env, cfg.interaction_kwargs, cfg.user),
                },
            }
        )
    return result


def write_parquet(rows: list[dict[str, Any]], path: Path, schema: Any = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    # zstd: self-contained rows carry tool code and data; it halves them against the default snappy (bench/row_portability.py)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp, compression="zstd")
    tmp.replace(path)  # a crashed export never leaves a half-written parquet under the final name


def write_export(result: ExportResult, out: str | Path, config: ExportConfig, extra: dict[str, Any]) -> Path:
    """Write `<out>/mix_<mode>/{train,val}.parquet`, `dropped.jsonl`, `manifest.json`; returns the folder."""
    folder = Path(out) / f"mix_{config.mixing_mode}"
    # one schema for both splits, inferred from every row: an empty split keeps the columns, and the
    # keys of a scripted user's interaction_kwargs (missing-value rows) are kept where the first row
    # has none (other rows read them as null)
    every = result.train + result.val
    schema = pa.Table.from_pylist(every).schema if every else None
    write_parquet(result.train, folder / "train.parquet", schema)
    write_parquet(result.val, folder / "val.parquet", schema)
    with open(folder / "dropped.jsonl", "w", encoding="utf-8") as f:
        for d in result.dropped:
            f.write(json.dumps(asdict(d)) + "\n")
    manifest = {
        "row_version": ROW_VERSION,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "train_rows": len(result.train),
        "val_rows": len(result.val),
        "dropped_rows": len(result.dropped),
        "distractors": result.distractors,
        "mixing": result.mixing,
        "config": config.model_dump(mode="json"),
        **extra,
    }
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return folder
