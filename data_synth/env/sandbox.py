"""Running candidate tools in the sandbox (`astra_foundation.sandbox`), the only place they run.

`run_tool_calls` opens one fresh session holding the given tools (module names as
`env_registry.spec.tool_module` makes them, so a tool called `statistics` never shadows
the standard module), runs the calls in order and closes the session. `output_problem` is
the check of docs/method.md §2.4(e): the call ran and its output contains the expected answer, by the
same matching rule validation and the reward use.
"""

from __future__ import annotations

import hashlib
from typing import Any

from astra_foundation.sandbox import CallResult, Module, Program
from env_registry.matching import answer_in_output
from env_registry.spec import AnswerRule, tool_module

SHOWN_OUTPUT_CHARS = 600


def _tag(sources: list[str]) -> str:
    return hashlib.sha256("\0".join(sources).encode("utf-8")).hexdigest()


async def run_tool_calls(
    sandbox: Any, tools: dict[str, str], calls: list[tuple[str, dict[str, Any]]]
) -> list[CallResult]:
    """`tools` maps tool name -> source; `calls` are (tool name, kwargs), run in order in one session."""
    if sandbox is None:
        raise RuntimeError("this step runs model-written code and needs a sandbox in its EnvContext")
    tag = _tag(list(tools.values()))
    program = Program(tuple(Module(name=tool_module(n, tag), source=src) for n, src in tools.items()))
    session = await sandbox.open_session(program)
    try:
        return [await sandbox.call(session, tool_module(n, tag), n, kwargs) for n, kwargs in calls]
    finally:
        await sandbox.close_session(session)


def format_call(name: str, args: dict[str, Any]) -> str:
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def output_problem(
    result: CallResult, call: str, answer: str, rule: AnswerRule | None = None, arguments: dict[str, Any] | None = None
) -> tuple[str, str] | None:
    """(kind, message for the model) when the call failed or missed the answer; None when it passed.
    The answer must be in what the tool returned, not in an echo of `arguments` (as the reward reads it)."""
    if not result.ok:
        kind = result.error_kind.value if result.error_kind else "error"
        return "code_error", f"calling {call} failed ({kind}): {result.message}"
    text = result.text
    if answer_in_output(answer, text, arguments or {}, rule):
        return None
    shown = text if len(text) <= SHOWN_OUTPUT_CHARS else text[:SHOWN_OUTPUT_CHARS] + "..."
    return "wrong_output", f"{call} returned {shown!r}, which does not contain the expected answer {answer!r}"
