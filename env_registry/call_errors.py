"""What a model reads when a tool call it wrote is refused, or ran and failed.

`astra_tool_agent` answers a call it cannot run (a malformed block, an unknown tool, arguments
that violate the schema) with a tool message instead of executing it; the golden demonstrations
(`env_registry.golden_sft`) show the same messages in their recovery examples, so a model
fine-tuned on them meets in RL exactly the text it learned to recover from. Both import these
functions: one source for the wording, and `env_registry.call_gate` decides which applies.
A call that ran and failed reads `Error (<kind>): <message>` (`failed`), the shape of the
sandbox's `CallResult.text`, whether the sandbox ran it (RL) or an LLM simulated it or an MCP
server answered it (trajectory synthesis).
"""

from __future__ import annotations

from collections.abc import Sequence


def refused(kind: str, reason: str) -> str:
    """The tool message of a call that was not run: its kind (e.g. `invalid_json`) and why."""
    return f"Error ({kind}): {reason}"


# How a failure outside the sandbox (a simulated tool's error, an MCP error result) is classed:
# as a tool that raised, the sandbox's `ErrorKind.EXCEPTION`.
FAILED_KIND = "exception"


def failed(message: str, kind: str = FAILED_KIND) -> str:
    """The tool message of a call that ran and failed: the sandbox's error kind and message."""
    return refused(kind, message)  # one shape for every error a tool message reports


def unknown_tool(name: str | None, shown: Sequence[str]) -> str:
    return refused("unknown_tool", f"there is no tool named {name!r}. Available tools: {', '.join(shown)}.")


def malformed(why: str) -> str:
    """A parser's explanation of a call block it could not decode (the reason inside `refused`)."""
    return f"Malformed tool call: {why}."


def not_json(error: Exception) -> str:
    """Why a call block whose text is not JSON was refused (`error` from `json.loads`)."""
    return malformed(f"the block is not valid JSON ({error})")
