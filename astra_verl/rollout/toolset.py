"""Per-sample tools: a row's `ToolRef`s resolved into callable, schema-checked sandbox tools.

A row lists the episode's tools in prompt order (`RowInfo.tools`: its own tools and
distractors from other environments). Each becomes an `EpisodeTool`: the name the model sees
and calls (the tool's own name), the sandbox module holding its code, and a compiled JSON
Schema validator for its arguments. Every tool's code is one sandbox module named
`<tool>__<env id prefix>` (`env_registry.spec.tool_module`), so two environments' tools with the same name, or a tool named like
a standard module (`math`, `json`), never clash inside a session.

Errors here are data errors (the export or the store is wrong), raised as `ToolsetError`
naming the row's environment and the tool: two shown tools with the same name (the mixer must
prevent that), a tool missing from its environment, an invalid JSON Schema.

Store handles, targets, validators and whole toolsets are cached in the `ToolCatalog` of the
worker's `RolloutContext`, each in a bounded LRU: the G rollouts of a group share the row, so
they share its (immutable) toolset; each episode still gets its own sandbox session, hence
fresh tool state.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jsonschema
from cachetools import LRUCache

from astra_foundation.sandbox.protocol import Module, Program
from astra_verl.calls.call_log import CallRecord
from env_registry import call_errors
from env_registry.arguments import argument_validator
from env_registry.call_gate import CallStatus, check_call, schema_problem
from env_registry.rows import RowError, RowInfo, ToolRef, embedded_spec, embedded_tool
from env_registry.spec import EnvSpec, RewardTarget, ToolSpec, tool_module
from env_registry.store import EnvStore

from .call_parsing import ParsedCall

MAX_LOGGED_RAW_CHARS = 4096  # raw text of an unparsable call kept in the log


class ToolsetError(ValueError):
    """The row's tools cannot be built (a data error in the export or the store)."""


@dataclass(frozen=True)
class EpisodeTool:
    name: str  # what the model sees and calls
    module: str  # sandbox module holding the code
    function: str  # the callable inside the module (the tool's own name)
    env_id: str  # environment the code comes from
    distractor: bool
    schema: dict[str, Any]  # OpenAI function schema shown in the prompt
    validator: Any  # compiled jsonschema validator of the arguments

    def check(self, arguments: dict[str, Any]) -> tuple[str, str] | None:
        """None when the arguments match the schema, else (failing keyword, model-readable reason)."""
        return schema_problem(self.validator, arguments)


@dataclass(frozen=True)
class Toolset:
    """An episode's tools: `tools` holds every loaded tool, `initially_shown` the prompt's ones."""

    env_id: str
    tools: dict[str, EpisodeTool]
    initially_shown: tuple[str, ...]
    program: Program

    def schemas(self, names: list[str] | tuple[str, ...]) -> list[dict[str, Any]]:
        return [self.tools[n].schema for n in names]

    async def execute(
        self,
        call: ParsedCall,
        shown: Sequence[str],
        sandbox: Any,
        session: Callable[[], Awaitable[Any]],
        *,
        turn: int,
        index: int,
        call_id: str | None = None,
        observe: Callable[[str], str] = str,
    ) -> CallRecord:
        """Check one call attempt against the shown tools and run it in the episode's sandbox session.

        A call that cannot run (malformed, unknown or hidden tool, arguments violating the schema)
        is not executed; its record carries the model-readable error as `output`. `observe` maps
        the full text to what the model sees (the agent loop truncates); `output_sha` hashes the
        full text. `session` is awaited only when a call runs. The check and the wording are
        `env_registry.call_gate`'s, shared with trajectory synthesis (SFT data).
        """
        tool = self.tools.get(call.name) if call.name in shown else None
        at = {"turn": turn, "index": index, "call_id": call_id}
        refusal = check_call(
            call.name,
            call.arguments,
            shown,
            lambda name: self.tools[name].validator,
            error_kind=call.error_kind,
            error=call.error,
        )
        if refusal is not None:
            return CallRecord(
                **at,
                tool=call.name or None,
                arguments=call.arguments if call.arguments is not None else call.raw[:MAX_LOGGED_RAW_CHARS],
                status=refusal.status,
                error_kind=refusal.error_kind,
                output=observe(refusal.text),
                output_sha=digest(refusal.text),
                distractor=tool.distractor if tool else False,
                source_env=tool.env_id if tool else None,
            )
        assert tool is not None and call.arguments is not None  # check_call refuses anything else
        opened = await session()
        t0 = time.perf_counter()
        result = await sandbox.call(opened, tool.module, tool.function, call.arguments)
        kind = None if result.ok else (result.error_kind.value if result.error_kind else "error")
        text = result.text if result.ok else call_errors.failed(result.message, kind)
        return CallRecord(
            **at,
            tool=tool.name,
            arguments=call.arguments,
            status=CallStatus.OK if result.ok else CallStatus.TOOL_ERROR,
            error_kind=kind,
            output=observe(text),
            output_sha=digest(text),
            distractor=tool.distractor,
            source_env=tool.env_id,
            elapsed_s=time.perf_counter() - t0,
        )

    @staticmethod
    def skipped(call: ParsedCall, text: str, *, turn: int, index: int, call_id: str | None = None) -> CallRecord:
        """The record of an attempt past `max_parallel_calls`: not run, not charged; a malformed
        attempt keeps its `error_kind` (BFCL's scorer reads it)."""
        return CallRecord(
            turn=turn,
            index=index,
            call_id=call_id,
            tool=call.name or None,
            arguments=call.arguments if call.arguments is not None else call.raw[:MAX_LOGGED_RAW_CHARS],
            status=CallStatus.SKIPPED,
            error_kind=call.error_kind,
            output=text,
            output_sha=digest(text),
        )


def digest(text: str) -> str:
    """A short content hash of a tool's full output (logged beside the possibly truncated text)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class ToolCatalog:
    """A worker's caches of open stores, reward targets, validators and built toolsets, each a bounded LRU.

    A store keeps its own LRU of parsed specs; the bounds here keep a long run over a large store
    (or many stores) from growing without limit.
    """

    def __init__(
        self, max_stores: int = 16, max_targets: int = 8192, max_validators: int = 16384, max_toolsets: int = 4096
    ):
        self._stores: LRUCache[str, Any] = LRUCache(max_stores)
        # specs carried by self-contained rows, by id (a content hash, checked once on the way in)
        self._embedded: LRUCache[str, EnvSpec] = LRUCache(max_targets)
        self._targets: LRUCache[tuple[str | None, str], RewardTarget] = LRUCache(max_targets)
        self._validators: LRUCache[tuple[str, str], Any] = LRUCache(max_validators)
        self._toolsets: LRUCache[tuple, Toolset] = LRUCache(max_toolsets)

    # -- specs -------------------------------------------------------------------------
    def store(self, location: str) -> Any:
        store = self._stores.get(location)
        if store is None:
            try:
                store = self._stores[location] = EnvStore.open(location)
            except FileNotFoundError as exc:
                raise FileNotFoundError(
                    f"{exc}. The row references its environments by this absolute path (exported with "
                    "`--rows store`): make the store visible there on every node, or re-export the rows "
                    "with the default `--rows self-contained`, which carry their environments"
                ) from exc
        return store

    def spec(self, location: str, env_id: str) -> EnvSpec:
        return self.store(location).get(env_id)  # the store keeps an LRU of parsed specs

    def target(self, location: str, env_id: str) -> RewardTarget:
        key = (location, env_id)
        target = self._targets.get(key)
        if target is None:
            target = self._targets[key] = self.spec(location, env_id).reward_target()
        return target

    def row_spec(self, row: RowInfo) -> EnvSpec:
        """The row's environment: carried by the row (self-contained) or read from its store."""
        if not row.self_contained:
            return self.spec(row.store, row.env_id)
        spec = self._embedded.get(row.env_id)
        if spec is None:
            spec = self._embedded[row.env_id] = embedded_spec(row)
        return spec

    def row_target(self, row: RowInfo) -> RewardTarget:
        key = (row.store, row.env_id)
        target = self._targets.get(key)
        if target is None:
            target = self._targets[key] = self.row_spec(row).reward_target()
        return target

    def _tool_spec(self, row: RowInfo, ref: ToolRef) -> ToolSpec:
        """A tool of the row's own environment or a distractor, from wherever the row says."""
        if ref.env_id == row.env_id:
            return self.row_spec(row).tool(ref.name)
        if not row.self_contained:
            return self.spec(row.store, ref.env_id).tool(ref.name)
        try:
            return embedded_tool(row, ref)
        except RowError as exc:
            raise ToolsetError(str(exc)) from exc

    # -- tools -------------------------------------------------------------------------
    def _validator(self, env_id: str, tool_name: str, parameters: dict[str, Any]) -> Any:
        key = (env_id, tool_name)
        validator = self._validators.get(key)
        if validator is None:
            try:
                validator = argument_validator(parameters)
            except jsonschema.SchemaError as exc:
                raise ToolsetError(
                    f"environment {env_id}: tool {tool_name!r} has an invalid JSON Schema ({exc.message}); "
                    "re-validate the environment"
                ) from exc
            self._validators[key] = validator
        return validator

    def toolset(self, row: RowInfo, extra: list[ToolRef] | tuple[ToolRef, ...] = ()) -> Toolset:
        """The row's tools (shown) plus `extra` (loaded hidden, e.g. a hook's tool pool)."""
        key = (row.store, row.env_id, tuple(row.tools), tuple(extra))
        cached = self._toolsets.get(key)  # an LRU: a hit makes it the most recent
        if cached is not None:
            return cached
        shown_names = [r.name for r in row.tools]
        dupes = sorted({n for n in shown_names if shown_names.count(n) > 1})
        if dupes:
            raise ToolsetError(
                f"row of environment {row.env_id} shows several tools named {dupes}; names must be unique "
                "(the mixer must not pick a distractor named like a shown tool)"
            )
        tools: dict[str, EpisodeTool] = {}
        modules: dict[str, Module] = {}
        for ref in row.tools:
            if ref.distractor == (ref.env_id == row.env_id):
                raise ToolsetError(
                    f"row of environment {row.env_id}: tool {ref.name!r} of {ref.env_id} is marked "
                    f"distractor={ref.distractor}; distractors, and only they, come from other environments"
                )
            tools[ref.name] = self._episode_tool(row, ref, modules)
        for ref in extra:
            if ref.name in tools:
                if (tools[ref.name].env_id, tools[ref.name].distractor) == (ref.env_id, ref.distractor):
                    continue  # the hook's pool repeats a shown tool
                raise ToolsetError(f"row of environment {row.env_id}: the hook's tool {ref} clashes with a shown tool")
            tools[ref.name] = self._episode_tool(row, ref, modules)
        toolset = Toolset(row.env_id, tools, tuple(shown_names), Program(tuple(modules.values())))
        self._toolsets[key] = toolset
        return toolset

    def _episode_tool(self, row: RowInfo, ref: ToolRef, modules: dict[str, Module]) -> EpisodeTool:
        try:
            tool = self._tool_spec(row, ref)
        except KeyError as exc:
            raise ToolsetError(
                f"row of environment {row.env_id}: environment {ref.env_id} has no tool {ref.name!r} "
                "(the row and the store disagree; re-export the rows)"
            ) from exc
        prefix = 8
        name = tool_module(ref.name, ref.env_id, prefix)
        while name in modules:  # environments whose ids share a prefix, with tools named alike
            if prefix >= len(ref.env_id):
                raise ToolsetError(
                    f"row of environment {row.env_id}: tools {ref.name!r} and another map to module {name}"
                )
            prefix += 8
            name = tool_module(ref.name, ref.env_id, prefix)
        modules[name] = Module(name=name, source=tool.source)
        return EpisodeTool(
            name=ref.name,
            module=name,
            function=ref.name,
            env_id=ref.env_id,
            distractor=ref.distractor,
            schema=tool.openai_schema(),
            validator=self._validator(ref.env_id, ref.name, tool.parameters),
        )
