"""The BFCL family: BFCL v4's multi-turn entries as environments for `astra_tool_agent`.

Source: the installed `bfcl-eval` package, used in place. Entries, their function docs (with
BFCL's held-back functions removed for miss_func and BFCL's language hint appended) and their
ground truth come from BFCL's own loaders (`bfcl_eval.utils.load_dataset_entry`,
`load_ground_truth_entry`); the API classes the tools run are BFCL's (`bfcl_tools`). Nothing of
BFCL's code or data is copied into this repository. Categories: base, miss_func, miss_param,
long_context (200 entries each in bfcl-eval 2026.3.23).

One entry becomes:

- an `EnvSpec` (the environment): every function of the entry's classes as a tool (a wrapper
  source that runs BFCL's class in the sandbox, a JSON Schema from BFCL's doc), the first user
  turn as `question`, and provenance `bfcl-eval==<version>:<entry id>`. BFCL has no final answer
  and no sub-question trace: its checker compares API state and call results turn by turn. So
  `sub_questions` is empty and `final_answer` is "" rather than something the F1 reward could
  misread; `scenario_type` (a required field) is `multi_hop`. Such specs break exactly two of
  the QA rules of `check_structure` (non_empty: the final answer; has_tool_node) and pass every
  other rule, the tool rules included. `env_registry validate` waives those two for this family
  and replays the entry's ground-truth calls instead of golden calls, twice in fresh sessions
  (determinism; `VALIDATION`, see `env_registry.family_rules`).
- a verl row (`export_rows`): env_registry's row with `agent_name="astra_tool_agent"`, the
  held-back functions removed from the shown tools, `extra_info.interaction_kwargs` for the
  `bfcl_multi_turn` hook (the later user turns and the tools each adds, as JSON), and
  `reward_model.ground_truth` = a `BfclTarget` (what BFCL's checker needs) for `astra_bfcl`.
  `data_source` is `astra/bfcl_multi_turn_<category>`, so verl's validation reports each
  category separately.

The environment is the entry's whole API surface: a miss_func function is a tool of the spec
from the start, only hidden; the hook reveals it at the turn BFCL names (`tool_pool()` +
`add_tools`), with BFCL's message for that turn.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import pyarrow as pa

from astra_foundation.errors import UserError
from astra_foundation.strict import RecordModel
from env_registry.export import ExportConfig, count_prompt_tokens, tool_schemas, write_parquet
from env_registry.export import export_rows as registry_rows
from env_registry.families.bfcl_package import bfcl_module
from env_registry.families.bfcl_tools import description, parameters_schema, wrapper_source
from env_registry.family_rules import FamilyRules, ReplayCall
from env_registry.rows import RowInfo
from env_registry.spec import EnvSpec, Provenance, ScenarioType, ToolSpec
from env_registry.store import EnvStore

CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
CATEGORY_LABELS = {"base": "Base", "miss_func": "Miss Func", "miss_param": "Miss Param", "long_context": "Long Context"}
GENERATOR = "bfcl_multi_turn"
HOOK_NAME = "bfcl_multi_turn"
TARGET_VERSION = 1
DOMAIN_PREFIX = "bfcl_multi_turn_"


class BfclDataError(UserError, ValueError):
    """The installed bfcl-eval data does not look the way this adapter reads it."""


@cache
def bfcl_version() -> str:
    return importlib.metadata.version("bfcl-eval")


def _bfcl_utils():
    return bfcl_module("bfcl_eval.utils")


@dataclass(frozen=True)
class BfclEntry:
    """One BFCL multi-turn entry as BFCL's inference loop sees it."""

    id: str
    category: str  # one of CATEGORIES
    turns: list[list[dict[str, Any]]]  # user messages per turn; [] on a miss_func hold-out turn
    initial_config: dict[str, Any]
    involved_classes: list[str]
    functions: list[dict[str, Any]]  # docs shown from the start
    held_back: dict[int, list[dict[str, Any]]] = field(default_factory=dict)  # turn -> docs added then
    ground_truth: list[list[str]] = field(default_factory=list)  # call strings per turn

    @property
    def long_context(self) -> bool:
        return self.category == "long_context"  # BFCL: "long_context" (or "composite") in the category

    def all_functions(self) -> list[dict[str, Any]]:
        return [*self.functions, *(doc for t in sorted(self.held_back) for doc in self.held_back[t])]


def load_entries(
    categories: Sequence[str] = CATEGORIES, ids: Iterable[str] | None = None, limit: int | None = None
) -> list[BfclEntry]:
    """BFCL's entries of `categories` (optionally only `ids`, and the first `limit` of each
    category), in BFCL's order."""
    unknown = sorted(set(categories) - set(CATEGORIES))
    if unknown:
        raise ValueError(f"unknown BFCL multi-turn categories {unknown}; known: {list(CATEGORIES)}")
    wanted = set(ids) if ids is not None else None
    out = []
    for category in categories:
        chosen = [e for e in _category(category) if wanted is None or e.id in wanted]
        out += chosen[:limit] if limit is not None else chosen
    if wanted is not None:
        missing = sorted(wanted - {e.id for e in out})
        if missing:
            raise BfclDataError(f"no BFCL multi-turn entries {missing[:5]} in categories {list(categories)}")
    return out


@cache
def _category(category: str) -> tuple[BfclEntry, ...]:
    """One category's entries, loaded once per process (BFCL's loader re-reads the function docs
    for every entry). Shared: treat them as read-only."""
    utils = _bfcl_utils()
    name = f"multi_turn_{category}"
    answers = {a["id"]: a["ground_truth"] for a in utils.load_ground_truth_entry(name)}
    return tuple(_entry(raw, category, answers) for raw in utils.load_dataset_entry(name))


def _entry(raw: dict[str, Any], category: str, answers: dict[str, list[list[str]]]) -> BfclEntry:
    entry_id = raw["id"]
    if entry_id not in answers:
        raise BfclDataError(f"{entry_id}: no ground truth in BFCL's possible_answer file")
    held_back = {int(t): docs for t, docs in (raw.get("missed_function") or {}).items()}
    turns = raw["question"]
    for i, turn in enumerate(turns):
        if len(turn) == 0 and i not in held_back:
            raise BfclDataError(f"{entry_id}: turn {i} has no user message and adds no function")
        if len(turn) > 1 or any(m.get("role") != "user" for m in turn):
            raise BfclDataError(f"{entry_id}: turn {i} is not a single user message: {[m.get('role') for m in turn]}")
    if not turns or not turns[0]:
        raise BfclDataError(f"{entry_id}: the first turn has no user message")
    if len(answers[entry_id]) != len(turns):
        raise BfclDataError(f"{entry_id}: {len(turns)} turns but {len(answers[entry_id])} ground-truth turns")
    return BfclEntry(
        id=entry_id,
        category=category,
        turns=turns,
        initial_config=raw.get("initial_config") or {},
        involved_classes=list(raw["involved_classes"]),
        functions=list(raw["function"]),
        held_back=held_back,
        ground_truth=answers[entry_id],
    )


def method_classes(involved_classes: Sequence[str]) -> dict[str, str]:
    """Function name -> the class that owns it, as BFCL's executor resolves it (a later class wins)."""
    return dict(_method_classes(tuple(involved_classes)))


@lru_cache(maxsize=256)
def _method_classes(involved_classes: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    doc_path = bfcl_module("bfcl_eval.constants.eval_config").MULTI_TURN_FUNC_DOC_PATH
    doc_files = bfcl_module("bfcl_eval.constants.executable_backend_config").MULTI_TURN_FUNC_DOC_FILE_MAPPING

    owner: dict[str, str] = {}
    for class_name in involved_classes:
        path = doc_path / doc_files[class_name]
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    owner[json.loads(line)["name"]] = class_name
    return tuple(owner.items())


def entry_spec(entry: BfclEntry, version: str | None = None) -> EnvSpec:
    """The environment of one entry (see the module docstring)."""
    class_modules = bfcl_module("bfcl_eval.constants.executable_backend_config").CLASS_FILE_PATH_MAPPING
    owner = method_classes(entry.involved_classes)
    tools = []
    for doc in entry.all_functions():
        name = doc["name"]
        if name not in owner:
            raise BfclDataError(f"{entry.id}: function {name!r} belongs to none of {entry.involved_classes}")
        class_name = owner[name]
        tools.append(
            ToolSpec(
                name=name,
                description=description(doc),
                parameters=parameters_schema(doc),
                source=wrapper_source(
                    entry_id=entry.id,
                    class_name=class_name,
                    module=class_modules[class_name],
                    method=name,
                    config=entry.initial_config.get(class_name, {}),
                    long_context=entry.long_context,
                ),
            )
        )
    return EnvSpec.create(
        domain=DOMAIN_PREFIX + entry.category,
        question=entry.turns[0][0]["content"],
        final_answer="",
        scenario_type=ScenarioType.MULTI_HOP,
        sub_questions=[],
        tools=tools,
        provenance=Provenance(generator=GENERATOR, source=f"bfcl-eval=={version or bfcl_version()}:{entry.id}"),
    )


Call = tuple[str, dict[str, Any]]


class ReplayError(ValueError):
    """A ground-truth call string is not a plain call with literal arguments."""


@lru_cache(maxsize=256)
def _parameters(class_name: str, method: str) -> tuple[str, ...]:
    class_modules = bfcl_module("bfcl_eval.constants.executable_backend_config").CLASS_FILE_PATH_MAPPING
    cls = getattr(bfcl_module(class_modules[class_name]), class_name)
    params = inspect.signature(getattr(cls, method)).parameters
    return tuple(n for n in params if n != "self")


def parse_call(text: str, owner: dict[str, str]) -> Call:
    """(name, arguments) of one ground-truth call string."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ReplayError(f"{text!r} does not parse: {exc.msg}") from exc
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ReplayError(f"{text!r} is not a call of a plain function name")
    name = node.func.id
    if name not in owner:
        raise ReplayError(f"{text!r} calls {name!r}, which none of the entry's classes has")
    try:
        args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
        positional = [ast.literal_eval(a) for a in node.args]
    except ValueError as exc:
        raise ReplayError(f"{text!r} has a non-literal argument") from exc
    if positional:
        names = _parameters(owner[name], name)
        if len(positional) > len(names):
            raise ReplayError(f"{text!r} passes {len(positional)} positional arguments to {name}{names}")
        args = {**dict(zip(names, positional, strict=False)), **args}
    return name, args


def turn_calls(entry: BfclEntry) -> list[list[Call]]:
    owner = method_classes(entry.involved_classes)
    return [[parse_call(c, owner) for c in turn] for turn in entry.ground_truth]


# -- validation ------------------------------------------------------------------------------

SANDBOX_PACKAGES = ("bfcl_eval", "mpmath")  # what the wrappers and BFCL's classes import
MAX_OUTPUT_CHARS = 200_000  # BFCL does not truncate observations; long_context ones pass 20,000


def entry_of(env: EnvSpec) -> BfclEntry:
    """The BFCL entry an environment was built from (`provenance.source`), from the installed
    bfcl-eval, which must be the version the environment was built with."""
    source = env.provenance.source or ""
    version, _, entry_id = source.partition(":")
    if version != f"bfcl-eval=={bfcl_version()}":
        raise BfclDataError(
            f"environment {env.id} was built from {source!r}, but bfcl-eval=={bfcl_version()} is installed; "
            "rebuild the store with the installed version"
        )
    category = entry_id.removeprefix("multi_turn_").rpartition("_")[0]
    return load_entries([category], ids=[entry_id])[0]


def ground_truth_replay(env: EnvSpec) -> list[ReplayCall]:
    """BFCL's ground-truth calls of the environment's entry, every turn in order (BFCL's checker,
    not an expected answer, judges their results)."""
    index = {t.name: i for i, t in enumerate(env.tools)}
    return [
        ReplayCall(f"ground_truth[{t}][{k}]", index[name], args)
        for t, turn in enumerate(turn_calls(entry_of(env)))
        for k, (name, args) in enumerate(turn)
    ]


# No final answer and no sub-question trace: BFCL's checker judges an episode turn by turn.
_NOT_APPLICABLE = {("non_empty", "final_answer"), ("has_tool_node", "sub_questions")}

VALIDATION = FamilyRules(
    replay_calls=ground_truth_replay,
    waives=lambda rule, field: (rule, field) in _NOT_APPLICABLE,
    sandbox={"packages": list(SANDBOX_PACKAGES), "max_output_chars": MAX_OUTPUT_CHARS, "call_timeout_s": 30.0},
)


class BfclTarget(RecordModel):
    """`reward_model.ground_truth` of a BFCL row: what BFCL's multi-turn checker needs."""

    version: int = TARGET_VERSION
    bfcl_version: str
    id: str
    category: str
    env_id: str
    involved_classes: list[str]
    initial_config: dict[str, Any]
    ground_truth: list[list[str]]

    def checker_entry(self) -> dict[str, Any]:
        """The `test_entry` fields `multi_turn_checker` reads."""
        return {"id": self.id, "initial_config": self.initial_config, "involved_classes": self.involved_classes}


def entry_target(entry: BfclEntry, env_id: str, version: str | None = None) -> BfclTarget:
    return BfclTarget(
        bfcl_version=version or bfcl_version(),
        id=entry.id,
        category=entry.category,
        env_id=env_id,
        involved_classes=entry.involved_classes,
        initial_config=entry.initial_config,
        ground_truth=entry.ground_truth,
    )


def hook_turns(entry: BfclEntry) -> list[dict[str, Any]]:
    """The user turns after the first, as the hook delivers them: `content` is None on a hold-out
    turn (the hook then sends BFCL's "I have updated some more functions" message)."""
    return [
        {
            "content": turn[0]["content"] if turn else None,
            "add_tools": [doc["name"] for doc in entry.held_back.get(i, [])],
        }
        for i, turn in enumerate(entry.turns)
        if i > 0
    ]


def interaction_kwargs(entry: BfclEntry, env_id: str) -> dict[str, Any]:
    """`extra_info.interaction_kwargs` of the entry's row (strings only: parquet-friendly)."""
    return {"name": HOOK_NAME, "env_id": env_id, "bfcl_id": entry.id, "turns": json.dumps(hook_turns(entry))}


# -- rows ------------------------------------------------------------------------------------


@dataclass
class BfclExport:
    rows: list[dict[str, Any]]
    dropped: list[dict[str, Any]]


def export_rows(
    store: Any,
    entries: Sequence[BfclEntry],
    specs: Sequence[EnvSpec],
    *,
    tokenizer: Any = None,
    max_prompt_length: int | None = None,
    progress: bool = True,
) -> BfclExport:
    """verl rows for `entries` (their `specs` already in `store`), via env_registry's export."""
    if max_prompt_length is not None and tokenizer is None:
        raise ValueError("max_prompt_length needs a tokenizer to measure prompts")
    version = bfcl_version()
    config = ExportConfig(system_prompt=None, val_fraction=0.0, interaction_kwargs={"name": HOOK_NAME})
    result = registry_rows(store, list(specs), config=config, progress=progress)
    by_env = {spec.id: entry for spec, entry in zip(specs, entries, strict=True)}
    rows, dropped = [], []
    for row in result.train:
        info = RowInfo.from_extra_info(row["extra_info"])
        entry = by_env[info.env_id]
        hidden = {doc["name"] for docs in entry.held_back.values() for doc in docs}
        info = info.model_copy(update={"tools": [ref for ref in info.tools if ref.name not in hidden]})
        if tokenizer is not None:
            spec = store.get(info.env_id)
            tokens = count_prompt_tokens(tokenizer, row["prompt"], tool_schemas(spec, info.tools, store))
            info = info.model_copy(update={"prompt_tokens": tokens})
            if max_prompt_length is not None and info.prompt_tokens > max_prompt_length:
                dropped.append({"id": entry.id, "env_id": info.env_id, "prompt_tokens": info.prompt_tokens})
                continue
        row["extra_info"]["astra"] = info.to_json()
        row["extra_info"]["split"] = "val"
        row["extra_info"]["index"] = len(rows)
        row["extra_info"]["interaction_kwargs"] = interaction_kwargs(entry, info.env_id)
        row["reward_model"] = {
            "style": "rule",
            "ground_truth": entry_target(entry, info.env_id, version).model_dump_json(),
        }
        rows.append(row)
    return BfclExport(rows=rows, dropped=dropped)


def _row_schema(rows: list[dict[str, Any]]) -> Any:
    return pa.Table.from_pylist(rows[:1]).schema  # every row has the same shape; an empty file keeps it


def build(
    out: str | Path,
    categories: Sequence[str] = CATEGORIES,
    *,
    ids: Iterable[str] | None = None,
    limit: int | None = None,
    tokenizer: Any = None,
    max_prompt_length: int | None = None,
    progress: bool = True,
) -> Path:
    """Write `<out>/store` (the environments), `<out>/<category>.parquet` and `<out>/all.parquet`
    (the rows, for `data.val_files`), `<out>/dropped.jsonl` and `<out>/manifest.json`."""
    out = Path(out)
    entries = load_entries(categories, ids, limit)
    version = bfcl_version()
    specs = [entry_spec(e, version) for e in entries]
    with EnvStore.open(out / "store", "a") as store:
        store.add_many(specs)
    store = EnvStore.open(out / "store")
    exported = export_rows(
        store, entries, specs, tokenizer=tokenizer, max_prompt_length=max_prompt_length, progress=progress
    )
    by_category: dict[str, list[dict[str, Any]]] = {c: [] for c in categories}
    for row in exported.rows:
        by_category[row["data_source"].removeprefix("astra/" + DOMAIN_PREFIX)].append(row)
    if not exported.rows:
        raise BfclDataError(
            f"no rows to write: all {len(exported.dropped)} selected entries have prompts over "
            f"max_prompt_length={max_prompt_length} (see the tokens in the error-free run without it)"
        )
    schema = _row_schema(exported.rows)
    for category, rows in by_category.items():
        write_parquet(rows, out / f"{category}.parquet", schema)
    write_parquet(exported.rows, out / "all.parquet", schema)
    with open(out / "dropped.jsonl", "w", encoding="utf-8") as f:
        for d in exported.dropped:
            f.write(json.dumps(d) + "\n")
    manifest = {
        "format": "astra-bfcl-rows",
        "version": TARGET_VERSION,
        "bfcl_version": version,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": {c: len(r) for c, r in by_category.items()},
        "dropped": len(exported.dropped),
        "max_prompt_length": max_prompt_length,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return out
