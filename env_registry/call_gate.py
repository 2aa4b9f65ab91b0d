"""The gate every tool call passes before it runs, and the one status vocabulary of a call.

(Named a gate, not a check: `call_check` is the reward target's field, `spec.CallCheck`, the
identifying arguments a call must agree on to solve a sub-question, a different question asked
after the call ran.)

Two loops let a model call tools: RL (`astra_verl.rollout.toolset`, and the eval chat rollout)
and trajectory synthesis (`data_synth.traj.interact`), whose episodes become SFT data. A model
fine-tuned on that data must meet in RL exactly the refusals it learned to recover from, so both
loops check a call here, in the same order, and word the refusal with `call_errors`:

1. the call could not be decoded (a malformed block, arguments that are not a JSON object):
   `BAD_JSON`, with the decoder's kind and explanation;
2. its name is not among the tools the model was shown: `UNKNOWN_TOOL`;
3. its arguments violate the tool's JSON Schema (`env_registry.arguments`, formats asserted):
   `SCHEMA_ERROR`, the failing keyword as `error_kind`.

A call that passes runs; it ends `OK` or `TOOL_ERROR` (the sandbox's error, or a simulated or
MCP tool's failure worded by `call_errors.failed`). `SKIPPED` is RL's: a call beyond
`max_parallel_calls` in one turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from jsonschema.exceptions import best_match

from env_registry import call_errors

if TYPE_CHECKING:  # the LLM client's package is heavy to import; RL workers never need it here
    from astra_foundation.llm.types import ToolCall

__all__ = ["CallStatus", "INVALID", "Refusal", "check_call", "openai_arguments", "schema_problem"]


class CallStatus(str, Enum):
    OK = "ok"
    UNKNOWN_TOOL = "unknown_tool"  # the name is not among this episode's tools
    BAD_JSON = "bad_json"  # the call block or its arguments are not a JSON object
    SCHEMA_ERROR = "schema_error"  # arguments violate the tool's JSON Schema
    TOOL_ERROR = "tool_error"  # the call ran and failed (see error_kind)
    SKIPPED = "skipped"  # beyond max_parallel_calls in one turn; not executed


# Refused before any tool code ran: the model's mistake, not the tool's.
INVALID = frozenset({CallStatus.UNKNOWN_TOOL, CallStatus.BAD_JSON, CallStatus.SCHEMA_ERROR})


@dataclass(frozen=True)
class Refusal:
    """A call that must not run: its status, a detail (decoder kind or schema keyword), the tool message."""

    status: CallStatus
    error_kind: str | None
    text: str


def schema_problem(validator: Any, arguments: dict[str, Any]) -> tuple[str, str] | None:
    """None when `arguments` match the schema of `validator`, else (failing keyword, model-readable reason)."""
    error = best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = "arguments" + "".join(f"[{p!r}]" if isinstance(p, str) else f"[{p}]" for p in error.absolute_path)
    return str(error.validator), f"{where}: {error.message}"


def check_call(
    name: str | None,
    arguments: dict[str, Any] | None,
    shown: Sequence[str],
    validator: Callable[[str], Any],
    *,
    error_kind: str | None = None,
    error: str = "",
) -> Refusal | None:
    """None when the call may run, else why not (see the module docstring for the order).

    `arguments` is None, with the decoder's `error_kind` and `error`, when the call did not
    decode; `validator(name)` gives the compiled validator of a shown tool's arguments.
    """
    if error_kind is not None or arguments is None:
        kind = error_kind or CallStatus.BAD_JSON.value
        return Refusal(CallStatus.BAD_JSON, kind, call_errors.refused(kind, error))
    if name not in shown:
        return Refusal(CallStatus.UNKNOWN_TOOL, None, call_errors.unknown_tool(name, shown))
    problem = schema_problem(validator(name), arguments)
    if problem is None:
        return None
    keyword, why = problem
    text = call_errors.refused("schema_error", f"arguments of {name!r} do not match its parameters: {why}")
    return Refusal(CallStatus.SCHEMA_ERROR, keyword, text)


def openai_arguments(call: ToolCall) -> tuple[dict[str, Any] | None, str]:
    """The arguments of an OpenAI tool call as `check_call` reads them: (object, "") or (None, why not).

    The LLM client reads an empty argument string as {}; it is not JSON, and BFCL's
    function-calling handlers reject it, so here it is a call that did not decode.
    """
    if not call.arguments.strip():
        return None, "arguments are empty; send a JSON object ({} for a function without parameters)"
    if call.args is None:
        return None, call.error or "arguments are not a JSON object"
    return call.args, ""
