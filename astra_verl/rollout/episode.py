"""One episode's state, as both rollouts keep it; it is the `EpisodeView` the hooks read.

`astra_tool_agent` (token ids, inside verl) and the chat evaluation rollout (messages, against a
served model) run the same episode: the row's environment, its hook, its tools, its log. Both
open it with `Episode.open` and extend it with what only they track.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from astra_verl.calls.call_log import EpisodeLog
from env_registry.rows import RowInfo, ToolRef
from env_registry.spec import EnvSpec, RewardTarget

from .episode_hook import create_hook
from .hooks import EnvironmentHook, HookError
from .toolset import ToolCatalog, Toolset
from .verl_interaction import Interactions


@dataclass
class Episode:
    """See the module docstring; subclasses add fields with defaults."""

    request_id: str
    row: RowInfo
    env: EnvSpec
    target: RewardTarget
    hook: EnvironmentHook
    toolset: Toolset
    log: EpisodeLog
    messages: list[dict[str, Any]]
    shown: list[str]

    @classmethod
    def open(
        cls,
        catalog: ToolCatalog,
        extra_info: Any,
        interaction_kwargs: Any,
        messages: Iterable[dict[str, Any]],
        *,
        request_id: str,
        default_hook: str,
        interaction_config_path: str | None = None,
        interactions: Interactions | None = None,
        **fields: Any,
    ) -> Episode:
        """The episode of a row (`extra_info` carries its `RowInfo`), its hook chosen by `interaction_kwargs`."""
        row = RowInfo.from_extra_info(extra_info)
        try:
            hook = create_hook(
                interaction_kwargs,
                default=default_hook,
                interaction_config_path=interaction_config_path,
                interactions=interactions,
            )
        except HookError as exc:
            raise HookError(f"row of environment {row.env_id}: {exc}") from exc
        toolset = catalog.toolset(row, hook.tool_pool())
        return cls(
            request_id=request_id,
            row=row,
            env=catalog.row_spec(row),
            target=catalog.row_target(row),
            hook=hook,
            toolset=toolset,
            log=EpisodeLog(env_id=row.env_id, hook=hook.name or None),
            messages=[dict(m) for m in messages],
            shown=list(toolset.initially_shown),
            **fields,
        )

    # -- the EpisodeView hooks read ------------------------------------------------------
    @property
    def shown_tools(self) -> list[str]:
        return list(self.shown)

    def tool_schemas(self, refs: list[ToolRef] | tuple[ToolRef, ...]) -> list[dict[str, Any]]:
        return self.toolset.schemas([r.name for r in refs])

    # -- shared by both rollouts ---------------------------------------------------------
    @property
    def tool_needing(self) -> set[str]:
        return {q.id for q in self.target.sub_questions if q.needs_tool}

    def reveal(self, refs: Iterable[ToolRef]) -> None:
        """Show tools a hook adds; each must be one its `tool_pool()` declared (loaded at the start)."""
        for ref in refs:
            tool = self.toolset.tools.get(ref.name)
            if tool is None or (tool.env_id, tool.distractor) != (ref.env_id, ref.distractor):
                raise HookError(
                    f"hook {self.hook.name!r} adds tool {ref} that its tool_pool() did not declare "
                    "(tools a hook adds must be loaded at episode start)"
                )
            if ref.name not in self.shown:
                self.shown.append(ref.name)
