"""The episode record `astra_tool_agent` writes and the reward managers read.

It travels in `AgentLoopOutput.extra_fields["astra_episode"]` as a plain JSON-able dict (verl
moves extra fields between Ray workers as numpy object arrays) and reaches the reward manager
in `non_tensor_batch["tool_extra_fields"]`. `EpisodeLog.from_extra_fields` is the only reader;
it raises `CallLogError` naming the field when the record is missing or malformed, so a broken
rollout can never be scored as a silent 0. A call's status is `env_registry.call_gate.CallStatus`,
the vocabulary trajectory synthesis writes too.
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, ValidationError

from astra_foundation.strict import SettingsError, StrictModel, describe
from env_registry.call_gate import INVALID, CallStatus
from env_registry.episode_driver import Termination

__all__ = ["CallLogError", "CallRecord", "EpisodeLog", "Termination"]  # Termination: the driver's

CALL_LOG_VERSION = 1
EXTRA_FIELDS_KEY = "astra_episode"


class CallLogError(ValueError):
    """`tool_extra_fields` does not hold a valid astra episode record."""


class CallRecord(StrictModel):
    """One call attempt of an episode. Mutable: the loop fills `solved` and `seen` once the call's
    observation is (or is not) in the model's context."""

    model_config = ConfigDict(frozen=False, strict=False)  # read back from JSON: strings for enums
    section = "call"

    turn: int  # assistant turn (1-based) that issued the call
    index: int  # position of the call within its turn
    call_id: str | None = None  # the id its assistant and tool messages carry (`call_<n>`, the episode driver's)
    tool: str | None  # None when no name could be parsed
    arguments: Any  # the parsed arguments, or the raw text when they did not parse
    status: CallStatus
    error_kind: str | None = None  # sandbox ErrorKind value, or a parse/schema detail
    output: str = ""  # the observation the model saw (after truncation)
    output_sha: str = ""  # sha256[:16] of the untruncated output
    distractor: bool = False  # the tool is an irrelevant tool mixed in from another environment
    source_env: str | None = None  # environment the tool's code came from
    solved: list[str] = Field(default_factory=list)  # sub-question ids this call's output solved
    # False when the call's tool message never entered the model's context (dropped because it
    # overflowed the response budget): such an output solves nothing.
    seen: bool = True
    elapsed_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status is CallStatus.OK


class EpisodeLog(StrictModel):
    """The episode record (persisted in extra_fields, versioned). Mutable: the loop writes it turn by turn."""

    model_config = ConfigDict(frozen=False, strict=False)  # read back from JSON: strings for enums
    section = EXTRA_FIELDS_KEY

    env_id: str
    calls: list[CallRecord] = Field(default_factory=list)
    assistant_turns: int = 0
    user_turns: int = 0  # injected user messages (from the interaction hook)
    final_answer: str = ""  # content of the last assistant turn without tool calls
    terminated_by: Termination | None = None
    hook: str | None = None  # the environment-interaction hook that ran the episode
    hook_state: dict[str, Any] = Field(default_factory=dict)  # its final state (`on_end`), JSON-able
    parser: str | None = None  # the tool parser that read the assistant turns; None: OpenAI tool calls
    version: int = CALL_LOG_VERSION

    # -- counters used by reward_extra_info and metrics ---------------------------------
    @property
    def num_calls(self) -> int:
        """Every call the model attempted, valid or not: what precision is charged for."""
        return sum(1 for c in self.calls if c.status is not CallStatus.SKIPPED)

    @property
    def num_invalid_calls(self) -> int:
        return sum(1 for c in self.calls if c.status in INVALID)

    @property
    def num_tool_errors(self) -> int:
        return sum(1 for c in self.calls if c.status is CallStatus.TOOL_ERROR)

    @property
    def num_distractor_calls(self) -> int:
        return sum(1 for c in self.calls if c.distractor and c.status is not CallStatus.SKIPPED)

    # -- (de)serialisation --------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out = self.model_dump(mode="json", exclude={"calls"})
        out["calls"] = [_call_dict(c) for c in self.calls]
        return out

    def to_extra_fields(self) -> dict[str, Any]:
        return {EXTRA_FIELDS_KEY: self.to_dict()}

    @classmethod
    def from_dict(cls, d: Any) -> EpisodeLog:
        """The record written by `to_dict`; CallLogError names the field when it is not one."""
        if not isinstance(d, dict):
            raise CallLogError(f"{EXTRA_FIELDS_KEY} must be a dict, got {type(d).__name__}")
        if d.get("version") != CALL_LOG_VERSION:
            raise CallLogError(
                f"{EXTRA_FIELDS_KEY}.version is {d.get('version')!r}; this reader knows {CALL_LOG_VERSION}"
            )
        try:
            return cls(**d)
        except SettingsError as exc:
            raise CallLogError(_explain(exc.__cause__)) from exc

    @classmethod
    def from_extra_fields(cls, tool_extra_fields: Any) -> EpisodeLog:
        """Read the record from a sample's `tool_extra_fields` (raises CallLogError)."""
        if tool_extra_fields is None:
            raise CallLogError(
                "tool_extra_fields is missing: the sample was not produced by astra_tool_agent "
                "(check actor_rollout_ref.rollout.agent.default_agent_loop and the rows' agent_name)"
            )
        if not isinstance(tool_extra_fields, dict) or EXTRA_FIELDS_KEY not in tool_extra_fields:
            keys = sorted(tool_extra_fields) if isinstance(tool_extra_fields, dict) else type(tool_extra_fields)
            raise CallLogError(
                f"tool_extra_fields has no {EXTRA_FIELDS_KEY!r} (found {keys}): the sample was not produced "
                "by astra_tool_agent"
            )
        return cls.from_dict(tool_extra_fields[EXTRA_FIELDS_KEY])


def _call_dict(call: CallRecord) -> dict[str, Any]:
    """A record as JSON values. `arguments` is model output (JSON values decoded from it, any depth,
    any key): copied as is, past pydantic's JSON serializer, which refuses a key holding a lone
    surrogate or nesting past its depth limit, and would so abort a run."""
    d = call.model_dump(mode="json", exclude={"arguments"})
    return {k: call.arguments if k == "arguments" else d[k] for k in type(call).model_fields}


def _explain(exc: ValidationError) -> str:
    """The first problem of a malformed episode record, named by its field."""
    first = exc.errors()[0]
    loc = first["loc"]
    if loc[:1] == ("calls",) and len(loc) > 1:
        reason = first["ctx"]["error"] if first["type"] == "value_error" else first["msg"]
        return f"{EXTRA_FIELDS_KEY}.calls[{loc[1]}] is malformed: {reason}"
    if first["type"] == "missing" and len(loc) == 1:
        return f"{EXTRA_FIELDS_KEY} lacks the field {loc[0]!r}"
    return f"{EXTRA_FIELDS_KEY} is malformed: {describe(exc, EXTRA_FIELDS_KEY, EpisodeLog)}"
