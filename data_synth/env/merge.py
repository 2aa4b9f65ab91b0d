"""Step 5: intent clustering, tool merging, and the finished environment (docs/method.md §2.5).

Input `Tooled`, output `Merged`.
1. Cluster: with two or more tools, one LLM call groups the tool nodes by intent (same
   operation, data source, argument kinds, return kind). The reply must be a partition of the
   tool nodes (repair round, then `env.merge.cluster:<kind>`).
2. Merge each cluster of several members: the first member (in trace order) is the base; the
   LLM edits only its mock data and writes every member's call against the base tool. A reply
   is first checked statically: the code (`code.code_problems`, with the base schema), every
   call parsed safely and validated against the base schema; a reply that fails gets feedback
   at once. Tool names must be unique across the environment (`duplicate_tool_names`, known
   from the clusters, so checked before any merge is asked for).
3. **fix** (docs/method.md §2.5): the environment with the current merges passes the full structural
   validation (`invalid_env:<rule>`), and then every golden call is re-run on it, all tools
   loaded in one fresh session the way an episode loads them (`env_registry.validate.replay_env`).
   That replay is also the merge check: each member's output must contain its answer, so an
   edit that fixes one member and breaks another fails, and so does a merge that only works
   alone. Each cluster whose calls failed is told which member broke and how, and tries again
   (up to `merge_retries` tries in all, static failures included; then the instance is dropped,
   `merge_failed`, as ASTRA does). A failing tool that was not merged already passed alone in
   step 4, so no retry can fix it: `golden_replay_failed`. One session per round instead of one
   per cluster plus the replay: the sandbox is the CPU-heavy part of this step.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from astra_foundation.llm.extract import ReplyError, extract_code, extract_json
from astra_foundation.llm.scripted import scripted_source
from data_synth.env.calls import parse_call, schema_problems
from data_synth.env.code import code_problems
from data_synth.env.context import EnvContext
from data_synth.env.records import BuiltTool, Merged, Tooled
from data_synth.pipeline import Reject, Step, gather_or_cancel
from data_synth.prompts import load_prompt
from env_registry.answer_channel import inferred_type
from env_registry.call_key import derive_call_key
from env_registry.shape import shape_of
from env_registry.spec import EnvSpec, GoldenCall, Provenance, ScenarioType, SubQuestion, ToolSpec
from env_registry.structure import ValidationIssue, check_structure, golden_call_of
from env_registry.validate import replay_env

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


@dataclass
class _Merge:
    """One cluster's merge conversation: the LLM edits the base tool (`cluster[0]`) until every
    member's call returns that member's answer."""

    cluster: list[BuiltTool]
    conversation: list[dict[str, str]]
    answers: dict[str, str]  # node id -> expected answer
    attempts: int = 0
    reply: str = ""
    problem: str = "no attempt"
    source: str = ""  # the last reply that passed the static checks, and its calls
    args: dict[str, dict] = field(default_factory=dict)

    def retry(self, problem: str) -> None:
        """Tell the model what was wrong with its last reply; the next attempt continues the conversation."""
        self.problem = problem
        self.conversation = [
            *self.conversation,
            {"role": "assistant", "content": self.reply},
            {"role": "user", "content": load_prompt(PROMPT).render("user.merge_retry", problem=problem)},
        ]


class MergeTools(Step[Tooled, Merged]):
    name = "env.merge"
    input_type = Tooled
    output_type = Merged

    def __init__(self, merge_retries: int = 20):
        self.merge_retries = merge_retries

    async def _cluster(self, record: Tooled, ctx: EnvContext) -> list[list[str]]:
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

    def _start(self, record: Tooled, cluster: list[BuiltTool]) -> _Merge:
        base = cluster[0]
        members = "\n".join(
            f"- {t.node_id}: {record.node(t.node_id).question} -> answer: {record.node(t.node_id).answer} "
            f"(its own tool was called as {t.call})"
            for t in cluster
        )
        schema = {"name": base.name, "description": base.description, "parameters": base.parameters}
        conversation = load_prompt(PROMPT).messages(
            "user.merge",
            schema=json.dumps(schema, indent=2, ensure_ascii=False),
            source=base.source,
            members=members,
            name=base.name,
        )
        return _Merge(cluster, conversation, {t.node_id: record.node(t.node_id).answer for t in cluster})

    async def _propose(self, record: Tooled, m: _Merge, ctx: EnvContext) -> None:
        """Ask until a reply passes the static checks; the replay then judges it."""
        while m.attempts < self.merge_retries:
            m.attempts += 1
            completion = await ctx.llm.complete(m.conversation, step=f"{self.name}.merge", sample=record.seed.sample)
            m.reply = completion.text
            try:
                m.source, m.args = self._check_merge(completion.text, m.cluster[0], m.cluster, m.answers)
                return
            except ReplyError as e:
                m.retry(str(e))
        raise Reject(
            "merge_failed",
            f"cluster {[t.node_id for t in m.cluster]} ({m.cluster[0].name}): no merge serves every member after "
            f"{self.merge_retries} tries; last problem: {m.problem[:500]}",
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
                model=None if scripted_source(record.model) else (record.model or None),
                scripted=scripted_source(record.model),
                prompt_version=";".join(f"{v}" for _, v in sorted(prompts.items())),
                seed=record.seed.sample,
                source=f"{record.seed.mode}:{record.seed.source}",
                created_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            ),
        )
        provisional = EnvSpec(scenario_type=ScenarioType.SINGLE_HOP, **fields)
        scenario = shape_of(provisional).scenario_type or ScenarioType.SINGLE_HOP
        return EnvSpec.create(scenario_type=scenario, answer_type=inferred_type(provisional), **fields)

    def _assemble(self, record: Tooled, groups: list[list[BuiltTool]], merges: dict[str, _Merge]) -> EnvSpec:
        """The environment with every cluster's current merge (a cluster of one keeps its tool)."""
        tools: list[ToolSpec] = []
        tool_of: dict[str, str] = {}
        for g in groups:
            base = g[0]
            m = merges.get(base.node_id)
            source, args = (m.source, m.args) if m else (base.source, {base.node_id: base.args})
            golden = [
                GoldenCall(args=args[t.node_id], expected=record.node(t.node_id).answer, answers=[t.node_id]) for t in g
            ]
            tool = ToolSpec(
                name=base.name,
                description=base.description,
                parameters=base.parameters,
                source=source,
                golden_calls=golden,
            )
            tool.call_key = derive_call_key(tool)  # what the reward checks a call's arguments against
            tools.append(tool)
            tool_of.update({t.node_id: base.name for t in g})
        prompts = {**record.prompts, self.name: load_prompt(PROMPT).tag}
        return self.build_env(record, tools, tool_of, prompts)

    async def process(self, record: Tooled, ctx: EnvContext) -> Merged:
        by_node = {t.node_id: t for t in record.tools}
        clusters = await self._cluster(record, ctx)
        groups = [[by_node[i] for i in c] for c in clusters]
        # a merged tool keeps its base's name, so clashes are known before any merge is asked for
        names = Counter(g[0].name for g in groups)
        dupes = sorted(n for n, k in names.items() if k > 1)
        if dupes:
            raise Reject(
                "duplicate_tool_names",
                f"tools {dupes} name different operations (clusters {clusters}); names must be unique",
            )
        merges = {g[0].node_id: self._start(record, g) for g in groups if len(g) > 1}
        pending = list(merges.values())
        while True:
            await gather_or_cancel(*(self._propose(record, m, ctx) for m in pending))
            env = self._assemble(record, groups, merges)
            issues = check_structure(env)
            if issues:
                raise Reject(f"invalid_env:{issues[0].rule.value}", "; ".join(str(i) for i in issues[:5]))
            issues = await replay_env(env, ctx.sandbox)
            if not issues:
                break
            pending = self._blame(issues, groups, merges)
        return Merged(
            key=record.key,
            env=env.model_dump(mode="json"),
            clusters=clusters,
            merge_attempts={b: m.attempts for b, m in merges.items()},
        )

    @staticmethod
    def _blame(issues: list[ValidationIssue], groups: list[list[BuiltTool]], merges: dict[str, _Merge]) -> list[_Merge]:
        """The merges whose calls failed the replay, each told which member broke and how. A
        failing tool that was not merged passed alone in step 4, so nothing here can fix it."""
        failed: dict[str, list[str]] = {}
        for issue in issues:
            where = golden_call_of(issue)
            group = groups[where[0]] if where else None
            if group is None or group[0].node_id not in merges:
                raise Reject("golden_replay_failed", "; ".join(str(x) for x in issues[:5]))
            j = where[1]
            failed.setdefault(group[0].node_id, []).append(f"{group[j].node_id}: {issue.message}")
        for base, problems in failed.items():
            merges[base].retry("; ".join(problems))
        return [merges[b] for b in failed]
