"""Settings of `astra_tool_agent`: the `astra.rollout` section plus verl's multi-turn keys.

verl's keys are reused where they exist (`actor_rollout_ref.rollout.multi_turn.*`:
`max_assistant_turns`, `max_user_turns`, `max_parallel_calls`, `max_tool_response_length`,
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
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from omegaconf import DictConfig, OmegaConf

TOOL_MESSAGE_FORMATS = ("text", "json")


@dataclass(frozen=True)
class AstraRolloutConfig:
    stop_when_all_solved: bool = False
    tool_message_format: Literal["text", "json"] = "text"
    tool_parser: str | None = None
    default_hook: str = "astra_default"
    interaction_config_path: str | None = None

    def __post_init__(self) -> None:
        if self.tool_message_format not in TOOL_MESSAGE_FORMATS:
            raise ValueError(
                f"astra.rollout.tool_message_format is {self.tool_message_format!r}; use one of {TOOL_MESSAGE_FORMATS}"
            )

    @classmethod
    def from_mapping(cls, section: Any) -> AstraRolloutConfig:
        if section is None:
            return cls()
        if isinstance(section, DictConfig):
            section = OmegaConf.to_container(section, resolve=True)
        if not isinstance(section, dict):
            raise ValueError(f"astra.rollout must be a mapping, got {type(section).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(section) - known)
        if unknown:
            raise ValueError(f"astra.rollout has unknown keys {unknown}; known keys: {sorted(known)}")
        return cls(**section)


@dataclass(frozen=True)
class TurnLimits:
    """The verl multi-turn keys the loop obeys (None = no limit)."""

    max_assistant_turns: int | None
    max_user_turns: int | None
    max_parallel_calls: int
    max_tool_response_length: int
    truncate_side: str
    response_length: int
    parser_format: str

    @classmethod
    def from_rollout_config(cls, rollout: Any) -> TurnLimits:
        mt = rollout.multi_turn
        return cls(
            max_assistant_turns=mt.max_assistant_turns or None,
            max_user_turns=mt.max_user_turns or None,
            max_parallel_calls=max(1, int(mt.max_parallel_calls)),
            max_tool_response_length=int(mt.max_tool_response_length),
            truncate_side=str(mt.tool_response_truncate_side),
            response_length=int(rollout.response_length),
            parser_format=str(mt.format),
        )


def read_configs(trainer_config: Any) -> tuple[AstraRolloutConfig, TurnLimits]:
    section = OmegaConf.select(trainer_config, "astra.rollout", default=None)
    return AstraRolloutConfig.from_mapping(section), TurnLimits.from_rollout_config(
        trainer_config.actor_rollout_ref.rollout
    )
