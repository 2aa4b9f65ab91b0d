"""Step 5: intent clustering, tool merging, and the finished environment (ASTRA §2.5).

Input `Tooled`, output `Merged`.
1. Cluster: with two or more tools, one LLM call groups the tool nodes by intent (same
   operation, data source, argument kinds, return kind). The reply must be a partition of the
   tool nodes (repair round, then `env.merge.cluster:<kind>`).
2. Merge each cluster of several members: the first member (in trace order) is the base; the
   LLM edits only its mock data and writes every member's call against the base tool. Each
   try is checked: the code statically (`code.code_problems`, with the base schema), every
   call parsed safely and validated against the base schema, and then all members' calls
   in one sandbox session: each output must contain that member's answer, so an edit that
   fixes one member and breaks another fails. Up to `merge_retries` tries with feedback,
   then the instance is dropped (`merge_failed`), as ASTRA does.
3. **fix** (ASTRA.md §2.5): tool names must be unique across the environment
   (`duplicate_tool_names`), and every golden call is re-run on the final merged tools, all
   tools loaded in one session the way an episode loads them (`env_registry.validate.replay_env`,
   `golden_replay_failed`), after the full structural validation (`invalid_env:<rule>`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from typing import Any

from data_synth.env.calls import parse_call, schema_problems
from data_synth.env.code import code_problems
from data_synth.env.records import BuiltTool, Merged, Tooled
from data_synth.env.sandbox import format_call, output_problem, run_tool_calls
from data_synth.llm.extract import ReplyError, extract_code, extract_json
from data_synth.pipeline import Reject, Step, StepContext
from data_synth.prompts import load_prompt
from env_registry.shape import shape_of
from env_registry.spec import EnvSpec, GoldenCall, Provenance, ScenarioType, SubQuestion, ToolSpec
from env_registry.validate import check_structure, replay_env

PROMPT = "env/merge"
GENERATOR = "astra_env_synth"


def parse_clusters(value: Any, ids: list[str]) -> list[list[str]]:
    clusters = value.get("clusters") if isinstance(value, dict) else None
    if not isinstance(clusters, list):
        raise ReplyError("wrong_keys", 'expected {"clusters": [{"members": [...], "intent": "..."}, ...]}')
    out: list[list[str]] = []
    for i, c in enumerate(clusters):
        members = c.get("members") if isinstance(c, dict) else c
        if not isinstance(members, list) or not members:
            raise ReplyError("wrong_keys", f"clusters[{i}].members must be a non-empty list of step ids")
        out.append([str(m) for m in members])
    seen = Counter(m for c in out for m in c)
    unknown = sorted(set(seen) - set(ids))
    twice = sorted(m for m, n in seen.items() if n > 1)
    missing = [i for i in ids if i not in seen]
    if unknown or twice or missing:
        raise ReplyError(
            "not_a_partition",
            f"every step must be in exactly one cluster; unknown {unknown}, in several {twice}, missing {missing}",
        )
    order = {i: k for k, i in enumerate(ids)}
    return sorted((sorted(c, key=order.__getitem__) for c in out), key=lambda c: order[c[0]])


def _tool_line(t: BuiltTool, record: Tooled) -> str:
    params = ", ".join(t.parameters.get("properties", {}))
    return f"- {t.node_id}: {t.name}({params}): {t.description} [step: {record.node(t.node_id).question}]"


class MergeTools(Step[Tooled, Merged]):
    name = "env.merge"
    input_type = Tooled
    output_type = Merged

    def __init__(self, merge_retries: int = 20):
        self.merge_retries = merge_retries

    async def _cluster(self, record: Tooled, ctx: StepContext) -> list[list[str]]:
        ids = [t.node_id for t in record.tools]
        if len(ids) < 2:
            return [ids]
        messages = load_prompt(PROMPT).messages(
            "user.cluster", tools="\n".join(_tool_line(t, record) for t in record.tools)
        )
        reply = await ctx.llm.complete_json(
            messages,
            step=f"{self.name}.cluster",
            check=lambda v: parse_clusters(v, ids),
            sample=record.seed.sample,
            temperature=0.0,
        )
        return reply.value

    def _check_merge(
        self, text: str, base: BuiltTool, members: list[BuiltTool], answers: dict[str, str]
    ) -> tuple[str, dict[str, dict]]:
        """(source, node id -> args) of a merge reply; raises ReplyError with what to fix."""
        source = extract_code(text)
        calls = extract_json(text).get("calls")
        if not isinstance(calls, dict):
            raise ReplyError("wrong_keys", 'the ```json block must be {"calls": {"<step id>": "<call>", ...}}')
        missing = [m.node_id for m in members if m.node_id not in calls]
        if missing:
            raise ReplyError("missing_ids", f"no call for steps {missing}")
        args: dict[str, dict] = {}
        for m in members:
            if not isinstance(calls[m.node_id], str):
                raise ReplyError("bad_call", f"the call of {m.node_id} must be a string")
            _, a = parse_call(calls[m.node_id], name=base.name)
            problems = schema_problems(a, base.parameters)
            if problems:
                raise ReplyError("bad_call", f"the call of {m.node_id} does not fit the schema: {'; '.join(problems)}")
            args[m.node_id] = a
        tool = {"name": base.name, "description": base.description, "parameters": base.parameters}
        problems = code_problems(source, tool, [(args[m.node_id], answers[m.node_id]) for m in members])
        if problems:
            raise ReplyError("code_static", "; ".join(problems))
        return source, args

    async def _merge(
        self, record: Tooled, cluster: list[BuiltTool], ctx: StepContext
    ) -> tuple[str, dict[str, dict], int]:
        base = cluster[0]
        p = load_prompt(PROMPT)
        members_text = "\n".join(
            f"- {t.node_id}: {record.node(t.node_id).question} -> answer: {record.node(t.node_id).answer} "
            f"(its own tool was called as {t.call})"
            for t in cluster
        )
        conversation = p.messages(
            "user.merge",
            schema=json.dumps(
                {"name": base.name, "description": base.description, "parameters": base.parameters},
                indent=2,
                ensure_ascii=False,
            ),
            source=base.source,
            members=members_text,
            name=base.name,
        )
        answers = {t.node_id: record.node(t.node_id).answer for t in cluster}
        problem = "no attempt"
        for attempt in range(1, self.merge_retries + 1):
            completion = await ctx.llm.complete(conversation, step=f"{self.name}.merge", sample=record.seed.sample)
            try:
                source, args = self._check_merge(completion.text, base, cluster, answers)
                results = await run_tool_calls(
                    ctx.sandbox, {base.name: source}, [(base.name, args[t.node_id]) for t in cluster]
                )
                failures = [
                    f"{t.node_id}: {found[1]}"
                    for t, r in zip(cluster, results, strict=True)
                    if (found := output_problem(r, format_call(base.name, args[t.node_id]), answers[t.node_id]))
                    is not None
                ]
                if not failures:
                    return source, args, attempt
                problem = "; ".join(failures)
            except ReplyError as e:
                problem = str(e)
            conversation = [
                *conversation,
                {"role": "assistant", "content": completion.text},
                {"role": "user", "content": p.render("user.merge_retry", problem=problem)},
            ]
        raise Reject(
            "merge_failed",
            f"cluster {[t.node_id for t in cluster]} ({base.name}): no merge serves every member after "
            f"{self.merge_retries} tries; last problem: {problem[:500]}",
        )

    def build_env(
        self, record: Tooled, tools: list[ToolSpec], tool_of: dict[str, str], prompts: dict[str, str]
    ) -> EnvSpec:
        subs = [
            SubQuestion(
                id=n.id,
                question=n.question,
                answer=n.answer,
                depends_on=n.depends_on,
                needs_tool=record.necessity[n.id].needs_tool,
                tool=tool_of.get(n.id),
                hop_level=n.hop_level,
            )
            for n in record.nodes
        ]
        fields = dict(
            domain=record.seed.domain,
            language=record.seed.language,
            question=record.question,
            final_answer=record.final_answer,
            sub_questions=subs,
            tools=tools,
            provenance=Provenance(
                generator=GENERATOR,
                model=record.model or None,
                prompt_version=";".join(f"{v}" for _, v in sorted(prompts.items())),
                seed=record.seed.sample,
                source=f"{record.seed.mode}:{record.seed.source}",
                created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            ),
        )
        provisional = EnvSpec(scenario_type=ScenarioType.SINGLE_HOP, **fields)
        scenario = shape_of(provisional).scenario_type or ScenarioType.SINGLE_HOP
        return EnvSpec.create(scenario_type=scenario, **fields)

    async def process(self, record: Tooled, ctx: StepContext) -> Merged:
        by_node = {t.node_id: t for t in record.tools}
        clusters = await self._cluster(record, ctx)
        groups = [[by_node[i] for i in c] for c in clusters]
        multi = [g for g in groups if len(g) > 1]
        results = await asyncio.gather(*(self._merge(record, g, ctx) for g in multi))
        merged_by_base = {g[0].node_id: r for g, r in zip(multi, results, strict=True)}

        tools: list[ToolSpec] = []
        tool_of: dict[str, str] = {}
        for g in groups:
            base = g[0]
            if base.node_id in merged_by_base:
                source, args, _ = merged_by_base[base.node_id]
            else:
                source, args = base.source, {base.node_id: base.args}
            golden = [GoldenCall(args=args[t.node_id], expected=record.node(t.node_id).answer) for t in g]
            tools.append(
                ToolSpec(
                    name=base.name,
                    description=base.description,
                    parameters=base.parameters,
                    source=source,
                    golden_calls=golden,
                )
            )
            tool_of.update({t.node_id: base.name for t in g})
        names = Counter(t.name for t in tools)
        dupes = sorted(n for n, k in names.items() if k > 1)
        if dupes:
            raise Reject(
                "duplicate_tool_names",
                f"tools {dupes} name different operations (clusters {clusters}); names must be unique",
            )
        prompts = {**record.prompts, self.name: load_prompt(PROMPT).tag}
        env = self.build_env(record, tools, tool_of, prompts)
        issues = check_structure(env)
        if issues:
            raise Reject(f"invalid_env:{issues[0].rule.value}", "; ".join(str(i) for i in issues[:5]))
        issues = await replay_env(env, ctx.sandbox)
        if issues:
            raise Reject("golden_replay_failed", "; ".join(str(i) for i in issues[:5]))
        return Merged(
            key=record.key,
            env=env.model_dump(mode="json"),
            clusters=clusters,
            merge_attempts={b: m[2] for b, m in merged_by_base.items()},
        )
