"""A model as the second source of candidate calls for golden-call recovery.

Asked only for the answers no LLM-free candidate produced (`recover_row(..., propose=...)`), it
sees the task text, the tool's schema, the answer the call must produce and the calls already
accepted with their outputs, and replies with argument objects. They are candidates and nothing
more: each runs in the sandbox beside the LLM-free candidates and the same acceptance decides
(exactly one call, up to argument order, produces the answer, and reproduces it in two fresh
sessions). A reply that is not JSON, or a model that does not answer, proposes nothing.

Requests go through the synthesis client (`astra_foundation.llm`, step `recover.propose`), so a
server, a scripted responder (tests) or the response cache serve them alike.
"""

from __future__ import annotations

import json
from typing import Any

from astra_foundation.llm.client import LLMClient
from astra_foundation.llm.types import LLMError
from env_registry.recovery import Proposer, Recovered, RowTools

__all__ = ["STEP", "llm_proposer"]

STEP = "recover.propose"
_SHOWN_OUTPUT = 600  # characters of an accepted call's output shown to the model

SYSTEM = (
    "You recover the tool call that produced a known answer. Given a task, a tool's JSON schema, the "
    "answer its call returned and the calls already made with their outputs, reply with a JSON object "
    '{"calls": [{...arguments...}, ...]}: up to five argument objects for that tool, most likely first, '
    "using values from the task or from the earlier outputs. Reply with the JSON object only."
)


def _request(row: RowTools, tool: str, answer: str, found: list[Recovered]) -> list[dict[str, Any]]:
    body = {
        "task": row.text,
        "tool": {"name": tool, "parameters": row.schemas.get(tool, {})},
        "answer_its_output_contains": answer,
        "calls_so_far": [{"tool": r.tool, "arguments": r.args, "output": r.output[:_SHOWN_OUTPUT]} for r in found],
    }
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": json.dumps(body, ensure_ascii=False, indent=1)},
    ]


def llm_proposer(client: LLMClient) -> Proposer:
    """A `Proposer` asking `client` (see the module docstring)."""

    async def propose(row: RowTools, tool: str, answer: str, found: list[Recovered]) -> list[dict[str, Any]]:
        try:
            reply = await client.complete_json(_request(row, tool, answer, found), step=STEP, expect=dict)
        except LLMError:
            return []  # no answer, or none that parses: no candidates from the model
        calls = reply.value.get("calls") if isinstance(reply.value, dict) else None
        return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []

    return propose
