"""The other half of tool use (issue 49, docs/method.md §1.8): tasks whose right behaviour is not
"call, then answer", derived from scored answerable tasks by `traj.variants`.

- unanswerable: the task's first tool is not offered (the rest of the server's tools are); the
  right trajectory makes no call for that step and ends with a declared inability,
  `<answer>cannot answer: CAPABILITY</answer>` (`env_registry.answer_channel`);
- missing_function: the task's last tool is not offered (a task of one tool cannot carry it);
  the earlier steps' calls, then the declared inability;
- missing_value: an LLM rewrites the query without one identifying argument value of the first
  tool's call (`prompts/traj/withhold_value.md`); an LLM user holds that value. The right
  trajectory asks (a turn without calls and without a channel), gets it, calls with it, answers.

WHEN the user speaks is `env_registry.variants.UserScript`, the rule RL and `eval envs` follow
(one listed turn: the user's reply; then `otherwise` once; an answer channel ends the episode);
WHAT it says is the model's (`env_registry.llm_user`: `missing_value_prompt`, `RoleSwappedChat`).

Shares (`VariantsConfig`, off by default): each scored task gets a task of a variant when a draw
fixed by the seed, the task key and the variant falls under that variant's share. A task that
cannot carry the variant is rejected with a counted reason. The judge applies `violation`'s
rules before its LLM (a declining trajectory that calls the removed tool or answers without
declaring, a missing-value one that calls before asking or with a value the user did not give).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import Field

from astra_foundation.llm import LLMClient
from astra_foundation.strict import StrictModel
from data_synth.pipeline import Reject
from data_synth.prompts import load_prompt
from data_synth.traj import describe
from data_synth.traj.query_checks import check_query
from data_synth.traj.records import ScoredTask, Server, Task, Trajectory, VariantJob, Withheld
from env_registry.answer_channel import has_channel, read
from env_registry.episode_driver import HookAction, SilentHook
from env_registry.llm_user import RoleSwappedChat, missing_value_prompt
from env_registry.matching import same_value
from env_registry.spec import AnswerType, Variant
from env_registry.variants import OTHERWISE, UserScript

# The behaviours `data_synth traj` derives (no_tool needs a query that states the answer's facts).
DERIVED = (Variant.UNANSWERABLE, Variant.MISSING_VALUE, Variant.MISSING_FUNCTION)
DECLINING = (Variant.UNANSWERABLE, Variant.MISSING_FUNCTION)


class VariantsConfig(StrictModel):
    """Shares of scored tasks that also get a task of each variant (each drawn on its own)."""

    section = "variants"

    unanswerable: float = Field(default=0.0, ge=0.0, le=1.0)
    missing_value: float = Field(default=0.0, ge=0.0, le=1.0)
    missing_function: float = Field(default=0.0, ge=0.0, le=1.0)
    seed: int = 0
    # the user's line to a question after its one reply (env_registry.variant_makers' wording)
    otherwise: str = "I don't know anything else about it; that is all I can tell you."

    def drawn(self, task_key: str, variant: Variant) -> bool:
        digest = hashlib.sha256(f"{self.seed}/traj.variants/{variant.value}/{task_key}".encode()).hexdigest()
        return int(digest[:12], 16) / float(16**12) < getattr(self, variant.value)

    @property
    def any(self) -> bool:
        return any(getattr(self, v.value) > 0 for v in DERIVED)


def jobs(scored: list[ScoredTask], cfg: VariantsConfig) -> list[VariantJob]:
    """One job per (answerable scored task, variant) the draw picks."""
    return [
        VariantJob(key=f"{s.key}:{v.value}", item=s, variant=v)
        for s in scored
        if s.task.behaviour is Variant.ANSWERABLE
        for v in DERIVED
        if cfg.drawn(s.key, v)
    ]


def offered(server: Server, task: Task) -> Server:
    """The server as the task's agent sees it: every tool but the task's removed one."""
    if task.removed_tool is None:
        return server
    return server.model_copy(update={"tools": [t for t in server.tools if t.name != task.removed_tool]})


# -- deriving a variant task --------------------------------------------------------------
def _removed(task: Task, variant: Variant, server: Server) -> str:
    if not task.tools:
        raise Reject("no_tools", f"task {task.key} lists no tool to remove")
    if variant is Variant.MISSING_FUNCTION and len(task.tools) < 2:
        raise Reject("single_step", f"task {task.key} needs one tool ({task.tools[0]}): no earlier step to keep")
    tool = task.tools[0] if variant is Variant.UNANSWERABLE else task.tools[-1]
    if tool not in server.tool_names():
        raise Reject("unknown_tool", f"task {task.key} needs {tool!r}, which server {server.server_id} lacks")
    return tool


def _variant_task(base: Task, variant: Variant, **fields: Any) -> Task:
    common = base.model_dump(exclude={"key", "behaviour", "variant_of", "removed_tool", "withheld", "query"})
    return Task.create(**{**common, "query": base.query, **fields, "behaviour": variant, "variant_of": base.key})


def _withhold_check(query: str, tool: Any, server: Server):
    """The reply's check: (Withheld, the rewritten query), or (None, the model's reason) when it finds
    no stated value (never None: `complete_json` keeps the raw reply for a check that returns None)."""
    properties = tool.parameters.get("properties") or {}

    def check(v: Any) -> tuple[Withheld | None, str]:
        if not isinstance(v, dict) or "argument" not in v:
            raise ValueError('expected {"argument": ..., "value": ..., "missing": ..., "query": ...}')
        if v["argument"] is None:
            return None, str(v.get("reason") or "")[:300]
        if v["argument"] not in properties:
            raise ValueError(f"{v['argument']!r} is no argument of {tool.name} (its arguments: {sorted(properties)})")
        value, missing, rewritten = (str(v.get(k) or "").strip() for k in ("value", "missing", "query"))
        if not value or value.casefold() not in query.casefold():
            raise ValueError(f"the value {value!r} is not stated in the original request")
        rewritten = check_query(rewritten, server.tool_names())
        if value.casefold() in rewritten.casefold():
            raise ValueError(f"the rewritten request still states the value {value!r}")
        if not missing:
            raise ValueError('"missing" must say what an assistant would ask for')
        return Withheld(tool=tool.name, argument=v["argument"], value=value, missing=missing), rewritten

    return check


async def withhold(client: LLMClient, server: Server, task: Task) -> tuple[Withheld, str]:
    """The value the first call's argument loses and the query without it (`LLMOutputError` when unusable)."""
    tool = server.tool(task.tools[0])
    messages = load_prompt("traj/withhold_value").messages("user", query=task.query, tool=describe.tool_schemas([tool]))
    reply = await client.complete_json(
        messages, step="traj.withhold_value", check=_withhold_check(task.query, tool, server)
    )
    held, text = reply.value
    if held is None:
        raise Reject("no_value_to_withhold", f"task {task.key}: the request states no argument of {tool.name}: {text}")
    return held, text


async def derive(client: LLMClient, server: Server, job: VariantJob) -> ScoredTask:
    """The variant task of `job` (its base's scores), or `Reject` naming why the task cannot carry it."""
    base = job.item.task
    if job.variant in DECLINING:
        task = _variant_task(base, job.variant, removed_tool=_removed(base, job.variant, server))
    elif job.variant is Variant.MISSING_VALUE:
        if not base.tools or base.tools[0] not in server.tool_names():
            raise Reject("no_tools", f"task {base.key} lists no tool of server {server.server_id} to call first")
        held, query = await withhold(client, server, base)
        task = _variant_task(
            base, job.variant, query=query, withheld=held, prompt=load_prompt("traj/withhold_value").tag
        )
    else:
        raise Reject(
            "unsupported_variant", f"data_synth traj derives {[v.value for v in DERIVED]}, not {job.variant.value}"
        )
    return ScoredTask(key=task.key, task=task, scores=job.item.scores)


# -- the LLM user -------------------------------------------------------------------------
class LLMUserHook(SilentHook):
    """The episode hook of a missing-value task: `UserScript` says when the user speaks (one listed
    turn, then `otherwise` once; an answer channel ends the episode), the LLM user what it says.
    The user turns delivered are counted once, by the driver (`log.user_turns`)."""

    def __init__(self, client: LLMClient, task: Task, otherwise: str):
        if task.withheld is None:
            raise ValueError(f"task {task.key} ({task.behaviour.value}) withholds no value: it has no user to ask")
        held = task.withheld
        self.script = UserScript(listed=1, otherwise=otherwise, answer_ends=True)
        system = missing_value_prompt(task.query, held.missing, held.value)
        self.chat = RoleSwappedChat(system, "", "", step="traj.user", client=client)

    async def on_assistant_end(self, view: Any, content: str) -> HookAction | None:
        step = self.script.next(content)
        if step is None:
            return None
        if step == OTHERWISE:
            return HookAction(user_message=self.script.otherwise)
        words = (await self.chat.reply(content)).strip()
        if not words:
            raise Reject("user_silent", "the LLM user's reply to the agent's question is empty")
        return HookAction(user_message=words)


# -- the judge's rules --------------------------------------------------------------------
def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def _declining_violation(traj: Trajectory) -> tuple[str, str] | None:
    removed = traj.task.removed_tool
    called = [c.index for c in traj.calls if c.name == removed]
    if called:
        return "called_removed_tool", f"calls {called} name {removed!r}, the tool this task does not offer"
    declared = read(traj.final_answer, AnswerType.INABILITY)
    if not declared.is_answer:
        why = declared.problem or "not a declared inability"
        return "no_declared_inability", f"the final answer must end <answer>cannot answer: CAPABILITY</answer>: {why}"
    return None


def _asked_at(messages: list[dict[str, Any]]) -> int | None:
    """The index of the user's first reply (the first user message after the query's)."""
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    return users[1] if len(users) > 1 else None


def _missing_value_violation(traj: Trajectory) -> tuple[str, str] | None:
    held = traj.task.withheld
    assert held is not None  # a missing-value task always carries it (derive)
    asked = _asked_at(traj.messages)
    if asked is None:
        return "never_asked", f"the agent never asked the user for {held.missing}"
    early = [i for i, m in enumerate(traj.messages[:asked]) if m.get("tool_calls")]
    if early:
        return "called_before_asking", f"messages {early} call tools before the user gave {held.missing}"
    given = [_arguments(c.arguments).get(held.argument) for c in traj.calls if c.name == held.tool]
    # the matcher's reading of values (case, punctuation, numbers by value), as RL's call check
    invented = [v for v in given if v is not None and not same_value(v, held.value)]
    if invented:
        return "invented_value", f"{held.tool}.{held.argument}={invented[0]!r}, the user holds {held.value!r}"
    if not any(same_value(v, held.value) for v in given if v is not None):
        return "value_unused", f"no {held.tool} call passes {held.argument}={held.value!r}"
    if not has_channel(traj.final_answer) or read(traj.final_answer, AnswerType.INABILITY).is_answer:
        return "no_answer", "after the user's reply the final answer must answer in <answer>...</answer>"
    return None


def violation(traj: Trajectory) -> tuple[str, str] | None:
    """(reason, detail) of the rule a variant trajectory breaks, None when it keeps them (or is answerable)."""
    if traj.task.behaviour in DECLINING:
        return _declining_violation(traj)
    if traj.task.behaviour is Variant.MISSING_VALUE:
        return _missing_value_violation(traj)
    return None


def behaviour(task: Task) -> str:
    """The right behaviour as the variant judge prompt states it."""
    prompt = load_prompt("traj/judge_variant")
    held = task.withheld
    return prompt.render(
        f"behaviour.{task.behaviour.value}", tool=task.removed_tool or "", missing=held.missing if held else ""
    )
