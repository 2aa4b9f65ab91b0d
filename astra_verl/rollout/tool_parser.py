"""The reporting parsers as verl `ToolParser`s, registered as `astra_<format>` (e.g. `astra_hermes`).

The parsing itself lives in `astra_verl.rollout.call_parsing` (no verl there). Here each parser
also keeps verl's `extract_tool_calls` interface working (valid calls only), so it serves verl's
own loops too. The plugin imports this module in every process (it registers into verl).
"""

from __future__ import annotations

import json

from verl.experimental.agent_loop.tool_parser import FunctionCall, ToolParser

from . import call_parsing
from .call_parsing import HermesCalls, ParsedCall, ParsedTurn, ReportingParser, split_reasoning

__all__ = [
    "HermesReportingParser",
    "ParsedCall",
    "ParsedTurn",
    "ReportingToolParser",
    "split_reasoning",
]


class ReportingToolParser(ReportingParser, ToolParser):
    """A verl `ToolParser` that also reports malformed call blocks (`parse`)."""

    async def extract_tool_calls(self, responses_ids: list[int], tools=None) -> tuple[str, list[FunctionCall]]:
        """verl's interface: the content and the well-formed calls (malformed ones are omitted here)."""
        turn = self.parse(responses_ids)
        calls = [
            FunctionCall(name=c.name, arguments=json.dumps(c.arguments, ensure_ascii=False)) for c in turn.calls if c.ok
        ]
        return turn.content, calls


@ToolParser.register("astra_hermes")
class HermesReportingParser(HermesCalls, ReportingToolParser):
    """Hermes / Qwen2.5 / Qwen3 format, as a verl `ToolParser`."""


@ToolParser.register("astra_bfcl_qwen")
class BfclQwenReportingParser(call_parsing.BfclQwenCalls, ReportingToolParser):
    """BFCL's QwenFCHandler decoding (BFCL evaluation in prompt style), as a verl `ToolParser`."""
