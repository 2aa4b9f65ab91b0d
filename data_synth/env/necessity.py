"""Step 2: tool necessity and legitimacy (docs/method.md §2.2).

Input `QA`, output `Labeled`. One LLM call labels every sub-question `{tool_necessity,
reason}` (external data, float arithmetic, statistics and domain calculations need a tool).
The reply must label each step exactly once (else the repair round, then
`env.necessity:<kind>`). Then the instance itself is judged:
- `non_tool_internal_node`: a sub-question others depend on needs no tool (non-tool steps
  may only be leaves: an agent cannot call its way past a step no tool answers);
- `no_tool_node`: nothing needs a tool, so there is no environment to build.
"""

from __future__ import annotations

from typing import Any

from astra_foundation.llm.extract import ReplyError
from data_synth.env.context import EnvContext
from data_synth.env.records import QA, Labeled, Necessity
from data_synth.env.trace import render_trace
from data_synth.pipeline import Reject, Step
from data_synth.prompts import load_prompt

PROMPT = "env/necessity"


def parse_labels(value: Any, ids: list[str]) -> dict[str, Necessity]:
    labels = value.get("labels") if isinstance(value, dict) else None
    if not isinstance(labels, list):
        raise ReplyError("wrong_keys", 'expected {"labels": [{"_uuid", "tool_necessity", "reason"}, ...]}')
    out: dict[str, Necessity] = {}
    for i, item in enumerate(labels):
        if not isinstance(item, dict):
            raise ReplyError("wrong_keys", f"labels[{i}] is not an object")
        node_id = str(item.get("_uuid", item.get("id", "")))
        flag = item.get("tool_necessity")
        if node_id not in ids:
            raise ReplyError("unknown_id", f"labels[{i}]: {node_id!r} is not a step id (ids: {ids})")
        if node_id in out:
            raise ReplyError("duplicate_ids", f"step {node_id!r} is labelled twice")
        if not isinstance(flag, bool):
            raise ReplyError("wrong_keys", f"labels[{i}].tool_necessity must be true or false, got {flag!r}")
        out[node_id] = Necessity(needs_tool=flag, reason=str(item.get("reason", "")))
    missing = [i for i in ids if i not in out]
    if missing:
        raise ReplyError("missing_ids", f"steps {missing} have no label; label every step")
    return out


def check_legitimate(qa: QA, necessity: dict[str, Necessity]) -> None:
    """Raise `Reject` when the labelled instance cannot become an environment."""
    depended_on = {d for n in qa.nodes for d in n.depends_on}
    internal = sorted(i for i in depended_on if not necessity[i].needs_tool)
    if internal:
        raise Reject(
            "non_tool_internal_node",
            f"steps {internal} need no tool but other steps depend on them (non-tool steps may only be leaves)",
        )
    if not any(n.needs_tool for n in necessity.values()):
        raise Reject("no_tool_node", "no sub-question needs a tool")


class LabelNecessity(Step[QA, Labeled]):
    name = "env.necessity"
    input_type = QA
    output_type = Labeled

    def __init__(self, temperature: float = 0.0):
        self.temperature = temperature

    async def process(self, record: QA, ctx: EnvContext) -> Labeled:
        ids = [n.id for n in record.nodes]
        messages = load_prompt(PROMPT).messages("user", question=record.question, trace=render_trace(record.nodes))
        reply = await ctx.llm.complete_json(
            messages,
            step=self.name,
            check=lambda v: parse_labels(v, ids),
            sample=record.seed.sample,
            temperature=self.temperature,
        )
        check_legitimate(record, reply.value)
        return Labeled(
            **record.model_dump(exclude={"prompts"}),
            prompts={**record.prompts, self.name: load_prompt(PROMPT).tag},
            necessity=reply.value,
        )
