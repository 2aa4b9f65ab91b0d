"""Step 4: tool synthesis per tool-needing sub-question (docs/method.md §2.4).

Input `Selected`, output `Tooled`. For each tool node (concurrently; its dependencies' Q/A
are given as context):

    outer attempt (<= outer_retries, each a fresh sample):
      (a) schema          tool document, checked (`code.check_schema`)
      (b) scale           more optional parameters / enums, backward compatible (`code.check_scaled`)
      (c) call            `f(x=...)`, parsed with `ast` (literals only), validated against the
                          schema, string values found in the request (`calls`)
      inner attempt (<= inner_retries, the same conversation with feedback):
      (d) implementation  a ```python block, statically checked (`code.code_problems`)
      (e) sandbox check   the call runs in the sandbox and its output contains the sub-answer

(a)-(c) replies get the client's repair round; a reply still unusable ends the outer attempt.
A node that exhausts its budget rejects the instance: `tool_synthesis_failed:<kind>`, kind
the last failure (schema, scale, call, code_static, code_error, wrong_output), detail naming
the node and the last problem. The other nodes' work is cancelled at the first failure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from astra_foundation.llm.extract import ExtractError, ReplyError, extract_code
from astra_foundation.llm.types import LLMOutputError
from data_synth.env.calls import parse_call, schema_problems, ungrounded_values
from data_synth.env.code import check_scaled, check_schema, code_problems
from data_synth.env.context import EnvContext
from data_synth.env.records import BuiltTool, Selected, Tooled, TraceNode
from data_synth.env.sandbox import format_call, output_problem, run_tool_calls
from data_synth.pipeline import Reject, Step, gather_or_cancel
from data_synth.prompts import load_prompt

PROMPT = "env/tool"


@dataclass
class _Failure(Exception):
    kind: str
    problem: str


def node_context(record: Selected, node: TraceNode) -> str:
    if not node.depends_on:
        return ""
    lines = [f"- {record.node(d).question} -> {record.node(d).answer}" for d in node.depends_on]
    return "Known answers from earlier steps:\n" + "\n".join(lines) + "\n"


class SynthesizeTools(Step[Selected, Tooled]):
    name = "env.tools"
    input_type = Selected
    output_type = Tooled

    def __init__(
        self,
        inner_retries: int = 5,
        outer_retries: int = 15,
        complexity_scaling: bool = True,
        require_grounded_values: bool = True,
    ):
        self.inner_retries = inner_retries
        self.outer_retries = outer_retries
        self.complexity_scaling = complexity_scaling
        self.require_grounded_values = require_grounded_values

    # -- (a)-(c) --------------------------------------------------------------------------
    async def _design(self, node: TraceNode, context: str, ctx: EnvContext, sample: int) -> tuple[dict, str, dict]:
        p = load_prompt(PROMPT)
        stage = "schema"
        try:
            reply = await ctx.llm.complete_json(
                p.messages("user.schema", sub_question=node.question, context=context),
                step=f"{self.name}.schema",
                check=check_schema,
                sample=sample,
            )
            schema = reply.value
            if self.complexity_scaling:
                stage = "scale"
                reply = await ctx.llm.complete_json(
                    p.messages("user.scale", schema=json.dumps(schema, indent=2, ensure_ascii=False)),
                    step=f"{self.name}.scale",
                    check=lambda v: check_scaled(v, schema),
                    sample=sample,
                )
                schema = reply.value
            stage = "call"
            request_text = node.question + "\n" + context

            def check_call(value):
                if not isinstance(value, dict) or not isinstance(value.get("call"), str):
                    raise ReplyError("bad_call", 'expected {"call": "name(arg=value, ...)"}')
                _, args = parse_call(value["call"], name=schema["name"])
                problems = schema_problems(args, schema["parameters"])
                if problems:
                    raise ReplyError("bad_call", "the arguments do not fit the schema: " + "; ".join(problems))
                if self.require_grounded_values:
                    invented = ungrounded_values(args, schema["parameters"], request_text)
                    if invented:
                        raise ReplyError(
                            "ungrounded_call",
                            f"values {invented} appear neither in the request nor in the known answers; "
                            "use values stated there",
                        )
                return value["call"], args

            reply = await ctx.llm.complete_json(
                p.messages(
                    "user.call",
                    sub_question=node.question,
                    context=context,
                    schema=json.dumps(schema, indent=2, ensure_ascii=False),
                    name=schema["name"],
                ),
                step=f"{self.name}.call",
                check=check_call,
                sample=sample,
            )
        except LLMOutputError as e:
            raise _Failure(stage, e.detail) from None
        call_text, args = reply.value
        return schema, call_text, args

    # -- (d)-(e) --------------------------------------------------------------------------
    async def _implement(
        self, node: TraceNode, schema: dict, args: dict, ctx: EnvContext, sample: int
    ) -> tuple[str, str, int]:
        p = load_prompt(PROMPT)
        call = format_call(schema["name"], args)
        conversation = p.messages(
            "user.implement",
            schema=json.dumps(schema, indent=2, ensure_ascii=False),
            name=schema["name"],
            answer=node.answer,
            call=call,
        )
        failure = _Failure("code_static", "no attempt")
        for inner in range(1, self.inner_retries + 1):
            completion = await ctx.llm.complete(conversation, step=f"{self.name}.implement", sample=sample)
            try:
                source = extract_code(completion.text)
                problems = code_problems(source, schema, [(args, node.answer)])
                if problems:
                    raise _Failure("code_static", "; ".join(problems))
                (result,) = await run_tool_calls(ctx.sandbox, {schema["name"]: source}, [(schema["name"], args)])
                problem = output_problem(result, call, node.answer, arguments=args)
                if problem is not None:
                    raise _Failure(*problem)
                return source, result.text, inner
            except ExtractError as e:
                failure = _Failure("code_static", str(e))
            except _Failure as f:
                failure = f
            conversation = [
                *conversation,
                {"role": "assistant", "content": completion.text},
                {"role": "user", "content": p.render("user.implement_retry", problem=failure.problem)},
            ]
        raise failure

    async def build(self, record: Selected, node: TraceNode, ctx: EnvContext) -> BuiltTool:
        context = node_context(record, node)
        last = _Failure("schema", "no attempt")
        for outer in range(self.outer_retries):
            # sample index: the seed's sample and the attempt, so retries draw fresh samples
            sample = record.seed.sample * 1000 + outer
            try:
                schema, call_text, args = await self._design(node, context, ctx, sample)
                source, output, inner = await self._implement(node, schema, args, ctx, sample)
            except _Failure as f:
                last = f
                continue
            return BuiltTool(
                node_id=node.id,
                name=schema["name"],
                description=schema["description"],
                parameters=schema["parameters"],
                source=source,
                call=call_text,
                args=args,
                output=output,
                outer_attempts=outer + 1,
                inner_attempts=inner,
                scaled=self.complexity_scaling,
            )
        raise Reject(
            f"tool_synthesis_failed:{last.kind}",
            f"step {node.id} ({node.question[:80]!r}): no working tool after {self.outer_retries} attempts; "
            f"last problem: {last.problem[:500]}",
        )

    async def process(self, record: Selected, ctx: EnvContext) -> Tooled:
        tools = await gather_or_cancel(*(self.build(record, n, ctx) for n in record.tool_nodes()))
        return Tooled(
            **record.model_dump(exclude={"prompts"}),
            prompts={**record.prompts, self.name: load_prompt(PROMPT).tag},
            tools=list(tools),
        )
