"""Settings of `astra_tool_agent`: the `astra.rollout` section plus verl's multi-turn keys.

verl's keys are reused where they mean what they mean in verl (`actor_rollout_ref.rollout.multi_turn.*`:
`max_assistant_turns`, `max_parallel_calls`, `max_tool_response_length`,
`tool_response_truncate_side`, `format`; `rollout.response_length`). Our own knobs live under
`astra.rollout` in a recipe:

    astra:
      rollout:
        stop_when_all_solved: false     # once every tool sub-question is solved: end, or give one
                                        # last turn for the final answer if a no-tool one is pending
        tool_message_format: text       # text | json: how an observation is shown to the model
        tool_parser: null               # default: astra_<multi_turn.format>, e.g. astra_hermes
        default_hook: astra_default     # hook for rows without extra_info.interaction_kwargs.name
        interaction_config_path: null   # YAML of verl<=0.7 interactions ({interaction: [...]})
        max_user_turns: null            # user messages a hook may add after the prompt's turn

verl's `multi_turn.max_user_turns` counts something else (in its `ToolAgentLoop`, every tool
round and every interaction turn), so it must stay null here: `astra.rollout.max_user_turns`
caps the user messages themselves, wherever one is appended (`env_registry.episode_driver`).

`read_settings` reads all the loop needs from a trainer config at once (`RolloutSettings`: the
section above, verl's turn limits and `astra.sandbox`); the worker's `RolloutContext` keeps it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from astra_foundation.sandbox import SandboxConfig
from astra_foundation.strict import SettingsError, StrictModel
from astra_verl.trainer_config import select_key
from env_registry.episode_driver import EpisodeLimits


class AstraRolloutConfig(StrictModel):
    """The `astra.rollout` section (see the module docstring)."""

    section = "astra.rollout"

    stop_when_all_solved: bool = False
    tool_message_format: Literal["text", "json"] = "text"
    tool_parser: str | None = None
    default_hook: str = "astra_default"
    interaction_config_path: str | None = None
    max_user_turns: int | None = Field(default=None, ge=0)


class TurnLimits(StrictModel):
    """The verl multi-turn keys the loop obeys (None = no limit)."""

    section = "actor_rollout_ref.rollout.multi_turn"

    max_assistant_turns: int | None
    max_parallel_calls: int
    max_tool_response_length: int
    truncate_side: str
    response_length: int
    parser_format: str

    @classmethod
    def from_rollout_config(cls, rollout: Any) -> TurnLimits:
        mt = rollout.multi_turn
        if getattr(mt, "max_user_turns", None) is not None:
            raise SettingsError(
                f"actor_rollout_ref.rollout.multi_turn.max_user_turns={mt.max_user_turns}: astra_tool_agent does not "
                "read it (in verl it counts tool rounds too); set it to null and cap the user messages with "
                "astra.rollout.max_user_turns"
            )
        return cls(
            max_assistant_turns=mt.max_assistant_turns or None,
            max_parallel_calls=max(1, int(mt.max_parallel_calls)),
            max_tool_response_length=int(mt.max_tool_response_length),
            truncate_side=str(mt.tool_response_truncate_side),
            response_length=int(rollout.response_length),
            parser_format=str(mt.format),
        )


class RolloutSettings(StrictModel):
    """Everything `astra_tool_agent` reads from the trainer config."""

    rollout: AstraRolloutConfig
    limits: TurnLimits
    sandbox: SandboxConfig

    def episode_limits(self) -> EpisodeLimits:
        """The caps the episode driver enforces."""
        return EpisodeLimits(
            max_assistant_turns=self.limits.max_assistant_turns,
            max_user_turns=self.rollout.max_user_turns,
            max_parallel_calls=self.limits.max_parallel_calls,
        )


def sandbox_settings(trainer_config: Any) -> SandboxConfig:
    """`astra.sandbox` as the sandbox's own config (unknown keys are errors)."""
    return SandboxConfig.from_mapping(select_key(trainer_config, "astra.sandbox"))


def read_settings(trainer_config: Any) -> RolloutSettings:
    return RolloutSettings(
        rollout=AstraRolloutConfig.from_mapping(select_key(trainer_config, "astra.rollout")),
        limits=TurnLimits.from_rollout_config(trainer_config.actor_rollout_ref.rollout),
        sandbox=sandbox_settings(trainer_config),
    )
