"""What a model reads when a tool call it wrote is refused before any tool code runs.

`astra_tool_agent` answers a call it cannot run (a malformed block, an unknown tool, arguments
that violate the schema) with a tool message instead of executing it; the golden demonstrations
(`env_registry.golden_sft`) show the same messages in their recovery examples, so a model
fine-tuned on them meets in RL exactly the text it learned to recover from. Both import these
functions: one source for the wording. Errors of calls that do run come from the sandbox
(`CallResult.text`).
"""

from __future__ import annotations

from collections.abc import Sequence


def refused(kind: str, reason: str) -> str:
    """The tool message of a call that was not run: its kind (e.g. `invalid_json`) and why."""
    return f"Error ({kind}): {reason}"


def unknown_tool(name: str | None, shown: Sequence[str]) -> str:
    return refused("unknown_tool", f"there is no tool named {name!r}. Available tools: {', '.join(shown)}.")


def malformed(why: str) -> str:
    """A parser's explanation of a call block it could not decode (the reason inside `refused`)."""
    return f"Malformed tool call: {why}."


def not_json(error: Exception) -> str:
    """Why a call block whose text is not JSON was refused (`error` from `json.loads`)."""
    return malformed(f"the block is not valid JSON ({error})")
