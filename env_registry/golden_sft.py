"""Golden demonstrations: an exported RL row turned into an SFT conversation that solves it.

For each row the conversation is the row's own prompt and tools (distractors included, in the
row's order), then one assistant turn per tool-needing sub-question, in dependency order, calling
that sub-question's golden call; the tool turn carries the output the tool's code actually gave
in the sandbox (never the spec's `expected` text); the last assistant turn is the final answer:
its prose, then the answer channel (`<answer>VALUE</answer>`, `answer_channel.final_message`),
the only part the reward reads.
One call per turn: verl's multi-turn SFT dataset tokenizes turn by turn, and grouped parallel tool
results would fail its sanity check.

Variants (issue 49, `env_registry.variants`) need no other plan: a missing-value environment's
demonstration first asks the user which entity is meant (`variants.ask_message`: no call, no
channel) and shows the scripted user's reply, then its calls; an unanswerable one makes no call
and a missing-function one only the earlier steps' calls (their tool sub-questions are all they
have), then the declared inability (`answer_channel.final_message`); a no-tool one answers at once.

Recovery. Demonstrations of successes only teach nothing about what to do after a failed call
(a policy fine-tuned on them answers an error with another invalid call). A share of the rows
(`Recovery.share`, default 20%, as ASTRA injects failures) therefore shows one failed attempt
before one of its golden calls, the error message the agent loop gives for it, and then the
corrected call. Three kinds, assigned in turn over the chosen rows:

- `wrong_argument`: the golden call with one string argument misspelled (one the schema still
  accepts: free text, not an enum), run in the sandbox in the episode's session; the tool's own error (e.g. "No city named 'Gehlom' ... Did you mean: Geholm?")
  is the observation. A tool that accepts the misspelling gives no failure: the row then gets the
  next kind instead (counted in `GoldenSummary.fallbacks`).
- `unknown_tool`: a call to a name the row does not show (the tool's name without its first word,
  as a model that drops a provider prefix writes it), refused with `call_errors.unknown_tool`.
- `malformed`: the golden call as a hermes `<tool_call>` block missing its closing brace, refused
  as the `astra_hermes` parser refuses invalid JSON (`call_errors.not_json`).

No-tool twins. Demonstrations that always end in a call teach a model to call a tool whatever it
is shown (measured: SmolLM2 after 80 SFT steps on them fell from 100 to 0 on BFCL's irrelevance
category). A share of the rows (`NoTool.share`, default 0) is therefore written a second time with
none of its own tools: the same prompt, as many tools as the row shows drawn from environments of
other domains (never a tool of the row's own environment, by name), and one assistant turn that
says no tool it has can answer, makes no call and ends with a declared inability
(`<answer>cannot answer: ...</answer>`). Which rows and which tools follow from
`NoTool.seed` and the environment ids only.

The failed attempt's assistant turn carries `weight: 0` (OpenAI's fine-tuning convention, read by
`astra_verl.training.sft_dataset.TrajSFTDataset`): the model sees the mistake and the error in context
and learns the correction, not the mistake. Which rows, which call and which kind follow from
`Recovery.seed` and the environment id only, so a rerun writes the same data.

Each row is an `env_registry.sft_record.SFTRecord`, the row `data_synth traj export` writes too:
`messages`, `tools` (JSON text), plus `env_id`, `recovery` (the kind, or ""), `irrelevant_tools`
(a no-tool twin), `variant` (the environment's, `EnvSpec.variant`) and `sft_version`;
verl reads it with `astra_verl.training.sft_dataset.TrajSFTDataset` (the `astra_sft*` recipes set it).
This is the laptop stand-in for trajectory synthesis: it needs no LLM, and it is what `make demo`
fine-tunes the tiny model on before GRPO, so that the policy emits real tool calls.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from astra_foundation.errors import UserError
from astra_foundation.sandbox import BatchJob, Module, Program, run_programs
from astra_foundation.strict import StrictModel
from env_registry import call_errors
from env_registry.answer_channel import channel, final_message
from env_registry.matching import answer_in_text
from env_registry.rows import RowInfo, row_env, row_tool
from env_registry.sft_record import RecoveryKind, SFTRecord
from env_registry.spec import EnvSpec, SubQuestion, Variant, tool_module
from env_registry.store import EnvStore
from env_registry.variants import ask_message

RECOVERY_KINDS: tuple[RecoveryKind, ...] = ("wrong_argument", "unknown_tool", "malformed")

Call = tuple[str, dict[str, Any]]  # (tool name, arguments)


class GoldenSFTError(UserError, ValueError):
    """An environment has no golden call for a sub-question, or a golden call failed in the sandbox."""


class Recovery(StrictModel):
    """Which demonstrations show a failed call and its correction (see the module docstring)."""

    section = "export-sft recovery"

    share: float = Field(default=0.2, ge=0.0, le=1.0, description="share of rows with one failed attempt")
    kinds: tuple[RecoveryKind, ...] = Field(default=RECOVERY_KINDS, min_length=1)
    seed: int = 0


class NoTool(StrictModel):
    """Which demonstrations also appear with other domains' tools only, answered without a call."""

    section = "export-sft no-tool"

    share: float = Field(default=0.0, ge=0.0, le=1.0, description="share of rows given a no-tool twin")
    seed: int = 0


def no_tool_reply(names: Sequence[str]) -> str:
    """The twin's answer: which tools it has, and that none of them fits (no call, no guess)."""
    return (
        f"None of the tools I have ({', '.join(names)}) can answer this question, "
        "so I cannot look it up and will not guess.\n"
        + channel("cannot answer: no tool that looks up what the question asks")
    )


@dataclass(frozen=True)
class Attempt:
    """One failed attempt, shown right before the golden call `before` (its correction)."""

    kind: RecoveryKind
    before: int  # index into GoldenPlan.calls
    message: dict[str, Any]  # the assistant turn as the model writes it
    runs: Call | None = None  # wrong_argument: the call the sandbox runs (its error is the observation)
    refusal: str = ""  # unknown_tool / malformed: the agent loop's tool message


@dataclass(frozen=True)
class GoldenPlan:
    row: dict[str, Any]
    env: EnvSpec
    calls: list[Call]  # golden calls in dependency order
    tools: list[dict[str, Any]]  # the row's tool schemas, in prompt order
    attempt: Attempt | None = None

    @property
    def shown(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]

    def sandbox_calls(self) -> list[Call]:
        """What runs in the episode's session, in order: the golden calls, a wrong argument before its fix."""
        calls = list(self.calls)
        if self.attempt is not None and self.attempt.runs is not None:
            calls.insert(self.attempt.before, self.attempt.runs)
        return calls


@dataclass
class GoldenSummary:
    rows: int = 0
    recovery: Counter = field(default_factory=Counter)  # kind -> rows
    fallbacks: Counter = field(default_factory=Counter)  # "wanted->given" -> rows
    irrelevant_tools: int = 0  # no-tool twins (rows with `irrelevant_tools`) written after the golden rows
    variants: Counter = field(default_factory=Counter)  # variant -> golden rows (issue 49)

    def describe(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.recovery.items())) or "none"
        text = (
            f"{self.rows} conversations, {sum(self.recovery.values())} with a failed call and its correction ({kinds})"
        )
        if self.irrelevant_tools:
            text += f", plus {self.irrelevant_tools} no-tool twins (other domains' tools, answered without a call)"
        if set(self.variants) - {"answerable"}:
            text += "; variants: " + ", ".join(f"{k} {n}" for k, n in sorted(self.variants.items()))
        if self.fallbacks:
            text += "; kinds replaced: " + ", ".join(f"{k} {n}" for k, n in sorted(self.fallbacks.items()))
        return text


def dependency_order(env: EnvSpec) -> list[SubQuestion]:
    """Sub-questions with every dependency before its dependents (spec order among equals)."""
    done: set[str] = set()
    pending = list(env.sub_questions)
    ordered: list[SubQuestion] = []
    while pending:
        ready = [q for q in pending if all(d in done for d in q.depends_on)]
        if not ready:
            raise GoldenSFTError(f"environment {env.id}: the trace has a cycle; validate the store")
        for q in ready:
            ordered.append(q)
            done.add(q.id)
        pending = [q for q in pending if q.id not in done]
    return ordered


def plan_row(row: dict[str, Any], stores: dict[str, EnvStore]) -> GoldenPlan:
    info = RowInfo.from_extra_info(row["extra_info"])
    env = row_env(info, stores)
    calls = []
    for q in dependency_order(env):
        if not q.needs_tool:
            continue
        tool = env.tool(q.tool)
        golden = next((g for g in tool.golden_calls if answer_in_text(q.answer, g.expected, q.match)), None)
        if golden is None:
            raise GoldenSFTError(f"environment {env.id}: no golden call of {tool.name} produces {q.answer!r} ({q.id})")
        calls.append((tool.name, golden.args))
    return GoldenPlan(row, env, calls, [row_tool(info, r, stores, env).openai_schema() for r in info.tools])


# -- failed attempts ----------------------------------------------------------------------


def _tool_call(index: int | str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def misspell(value: str, rng: random.Random) -> str:
    """`value` with two neighbouring letters swapped (a typo a model makes copying a name)."""
    spots = [i for i in range(1, len(value) - 1) if value[i].isalpha() and value[i + 1].isalpha()]
    spots = [i for i in spots if value[i].lower() != value[i + 1].lower()]
    if not spots:
        return value + value[-1:] if value else "?"
    i = rng.choice(spots)
    return value[:i] + value[i + 1] + value[i] + value[i + 2 :]


def wrong_arguments(parameters: dict[str, Any], args: dict[str, Any], rng: random.Random) -> dict[str, Any] | None:
    """`args` with one string misspelled such that the schema still holds (so the call reaches the tool,
    as it would in the agent loop); None when no string argument allows that (an enum, a pattern)."""
    validator = jsonschema.validators.validator_for(parameters)(parameters)
    keys = sorted(k for k, v in args.items() if isinstance(v, str) and v)
    rng.shuffle(keys)
    for key in keys:
        wrong = {**args, key: misspell(args[key], rng)}
        if wrong[key] != args[key] and validator.is_valid(wrong):
            return wrong
    return None


def wrong_name(name: str, shown: Sequence[str]) -> str:
    """A name the row does not show: the tool's name without its first word, else with a suffix."""
    head, sep, rest = name.partition("_")
    for candidate in (rest if sep else "", f"{name}_tool", f"get_{name}"):
        if candidate and candidate not in shown:
            return candidate
    raise GoldenSFTError(f"no unknown-tool name found for {name!r} among {list(shown)}")


def malformed_block(name: str, args: dict[str, Any]) -> str:
    """A call as the chat template renders it (hermes), less the closing brace of its object."""
    return '<tool_call>\n{"name": "' + name + '", "arguments": ' + json.dumps(args) + "\n</tool_call>"


def make_attempt(kind: RecoveryKind, plan: GoldenPlan, before: int, rng: random.Random) -> Attempt | None:
    """The failed attempt of `kind` before golden call `before`; None when the call allows none of it."""
    name, args = plan.calls[before]
    if kind == "wrong_argument":
        wrong = wrong_arguments(plan.env.tool(name).parameters, args, rng)
        if wrong is None:
            return None
        message = {"role": "assistant", "content": "", "tool_calls": [_tool_call("failed", name, wrong)]}
        return Attempt(kind, before, message, runs=(name, wrong))
    if kind == "unknown_tool":
        bad = wrong_name(name, plan.shown)
        message = {"role": "assistant", "content": "", "tool_calls": [_tool_call("failed", bad, args)]}
        return Attempt(kind, before, message, refusal=call_errors.unknown_tool(bad, plan.shown))
    text = malformed_block(name, args)
    raw = text[len("<tool_call>") : -len("</tool_call>")]
    try:
        json.loads(raw)
    except ValueError as exc:
        refusal = call_errors.refused("invalid_json", call_errors.not_json(exc))
    else:  # pragma: no cover - a JSON object without its closing brace never parses
        raise GoldenSFTError(f"malformed attempt {raw!r} parses as JSON")
    return Attempt(kind, before, {"role": "assistant", "content": text}, refusal=refusal)


def chosen_rows(plans: Sequence[GoldenPlan], share: float, seed: int, purpose: str = "") -> list[int]:
    """Indices of the round(share * n) chosen rows, ranked by a hash of seed, purpose and env id (a
    purpose draws its rows independently of the others; recovery's is "", as it always was)."""
    count = round(share * len(plans))

    def rank(i: int) -> str:
        return hashlib.sha256(f"{seed}/{purpose}{plans[i].env.id}/{i}".encode()).hexdigest()

    return sorted(sorted(range(len(plans)), key=rank)[:count])


def with_attempt(plan: GoldenPlan, kinds: Sequence[RecoveryKind], seed: int, summary: GoldenSummary) -> GoldenPlan:
    """`plan` with the first kind of `kinds` its calls allow (a later kind is a counted fallback)."""
    rng = random.Random(f"{seed}/{plan.env.id}")
    before = rng.randrange(len(plan.calls))
    for kind in kinds:
        attempt = make_attempt(kind, plan, before, rng)
        if attempt is not None:
            if kind != kinds[0]:
                summary.fallbacks[f"{kinds[0]}->{kind}"] += 1
            return replace(plan, attempt=attempt)
    raise GoldenSFTError(f"environment {plan.env.id}: none of the recovery kinds {list(kinds)} applies")


# -- conversations ------------------------------------------------------------------------


def conversation(plan: GoldenPlan, outputs: list[Any]) -> dict[str, Any]:
    """The SFT row of a plan, given the sandbox's `CallResult`s of `plan.sandbox_calls()`."""
    outputs = list(outputs)
    attempt = plan.attempt
    failed = outputs.pop(attempt.before) if attempt is not None and attempt.runs is not None else None
    messages = [dict(m) for m in plan.row["prompt"]]
    if plan.env.user is not None:  # a missing value: ask for it (no call, no answer), then the user's reply
        messages += [{"role": "assistant", "content": ask_message(plan.env)}]
        messages += [{"role": "user", "content": turn} for turn in plan.env.user.turns()]
    for i, ((name, args), result) in enumerate(zip(plan.calls, outputs, strict=True)):
        if attempt is not None and attempt.before == i:
            messages += _attempt_messages(attempt, failed)
        if not result.ok:
            raise GoldenSFTError(
                f"environment {plan.env.id}: golden call {name}({args}) failed in the sandbox: {result.message}"
            )
        call = _tool_call(i, name, args)
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": call["id"], "name": name, "content": result.text})
    # the prose answer, then the channel: the only part of it the reward reads (docs/reward.md)
    messages.append({"role": "assistant", "content": final_message(plan.env)})
    recovery = attempt.kind if attempt is not None else ""
    return sft_row(messages, plan.tools, plan.env.id, plan.env.variant, recovery=recovery)


def sft_row(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    env_id: str,
    variant: Variant,
    recovery: str = "",
    irrelevant_tools: bool = False,
) -> dict[str, Any]:
    """One row of the SFT parquet: an `SFTRecord` (the module docstring lists its columns)."""
    record = SFTRecord.build(
        f"golden demonstration of environment {env_id}",
        messages,
        tools,
        env_id=env_id,
        recovery=recovery,
        irrelevant_tools=irrelevant_tools,
        variant=variant,
    )
    return record.row()


def _among(plans: Sequence[GoldenPlan], keep: Callable[[GoldenPlan], bool]) -> list[GoldenPlan]:
    return [p for p in plans if keep(p)]


def no_tool_twins(plans: Sequence[GoldenPlan], no_tool: NoTool) -> list[dict[str, Any]]:
    """round(share * n) extra SFT rows: a chosen row's prompt, other domains' tools, no call. Only
    answerable rows have twins: a no-tool question is answered without tools whatever is shown,
    and a declining or missing-value one already has its own right behaviour."""
    answerable = _among(plans, lambda p: p.env.variant is Variant.ANSWERABLE)
    twins = []
    for i in chosen_rows(answerable, no_tool.share, no_tool.seed, purpose="no-tool/"):
        plan = answerable[i]
        own = {t.name for t in plan.env.tools} | set(plan.shown)
        pool = {
            t["function"]["name"]: t
            for other in plans
            if other.env.domain != plan.env.domain
            for t in other.tools
            if t["function"]["name"] not in own
        }
        if not pool:
            raise GoldenSFTError(
                f"environment {plan.env.id}: no-tool twins need rows of another domain than {plan.env.domain!r} "
                "(export more domains, or --no-tool-share 0)"
            )
        rng = random.Random(f"{no_tool.seed}/no-tool/{plan.env.id}")
        tools = [pool[n] for n in rng.sample(sorted(pool), min(len(plan.tools), len(pool)))]
        names = [t["function"]["name"] for t in tools]
        messages = [dict(m) for m in plan.row["prompt"]] + [{"role": "assistant", "content": no_tool_reply(names)}]
        twins.append(sft_row(messages, tools, plan.env.id, plan.env.variant, irrelevant_tools=True))
    return twins


def _attempt_messages(attempt: Attempt, failed: Any) -> list[dict[str, Any]]:
    """The failed attempt (weight 0: not learned) and the tool message the agent loop answers it with."""
    message = {**attempt.message, "weight": 0}
    tool: dict[str, Any] = {"role": "tool", "content": attempt.refusal}
    if "tool_calls" in message:
        call = message["tool_calls"][0]
        tool.update(tool_call_id=call["id"], name=call["function"]["name"])
    if attempt.runs is not None:
        tool["content"] = failed.text
    return [message, tool]


def _jobs(plans: Sequence[GoldenPlan]) -> list[BatchJob]:
    return [
        BatchJob(
            Program(tuple(Module(name=tool_module(t.name, p.env.id), source=t.source) for t in p.env.tools)),
            [(tool_module(name, p.env.id), name, args) for name, args in p.sandbox_calls()],
        )
        for p in plans
    ]


def golden_rows(
    rl_parquet: str | Path,
    recovery: Recovery | None = None,
    progress: Callable[[int, int], None] | None = None,
    no_tool: NoTool | None = None,
) -> tuple[list[dict[str, Any]], GoldenSummary]:
    """One golden SFT conversation per row of an exported RL parquet (tool outputs from the sandbox),
    then the no-tool twins of a share of them."""
    recovery = recovery or Recovery()
    stores: dict[str, EnvStore] = {}
    plans = [plan_row(row, stores) for row in pq.read_table(rl_parquet).to_pylist()]
    summary = GoldenSummary(rows=len(plans), variants=Counter(p.env.variant.value for p in plans))
    calling = [i for i, p in enumerate(plans) if p.calls]  # a row without calls has none to fail first
    for n, j in enumerate(chosen_rows([plans[i] for i in calling], recovery.share, recovery.seed)):
        start = n % len(recovery.kinds)  # the kinds in turn over the chosen rows
        kinds = recovery.kinds[start:] + recovery.kinds[:start]
        plans[calling[j]] = with_attempt(plans[calling[j]], kinds, recovery.seed, summary)
    outputs = run_programs(_jobs(plans), progress=progress)
    # a wrong argument the tool accepted is no failure: those rows take their next kind and run again
    redo = [i for i, p in enumerate(plans) if p.attempt and p.attempt.runs and outputs[i][p.attempt.before].ok]
    others = [k for k in recovery.kinds if k != "wrong_argument"]
    for i in redo:
        summary.fallbacks["wrong_argument->" + (others[0] if others else "none")] += 1
        plain = replace(plans[i], attempt=None)
        plans[i] = with_attempt(plain, others, recovery.seed, GoldenSummary()) if others else plain
    for i, out in zip(redo, run_programs(_jobs([plans[i] for i in redo])) if redo else [], strict=True):
        outputs[i] = out
    summary.recovery.update(p.attempt.kind for p in plans if p.attempt is not None)
    rows = [conversation(p, out) for p, out in zip(plans, outputs, strict=True)]
    twins = no_tool_twins(plans, no_tool or NoTool())
    summary.irrelevant_tools = len(twins)
    return rows + twins, summary


def write_golden_sft(
    rl_parquet: str | Path,
    out: str | Path,
    recovery: Recovery | None = None,
    progress=None,
    no_tool: NoTool | None = None,
) -> GoldenSummary:
    rows, summary = golden_rows(rl_parquet, recovery, progress=progress, no_tool=no_tool)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out)
    return summary
