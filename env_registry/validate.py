"""Validation of environments: the structural rules (`env_registry.structure`, pure), then
golden-call replay in the sandbox (here).

Replay rules (the structural ones are listed in `env_registry.structure`):
- replay_error          a golden call failed in the sandbox
- replay_mismatch       a golden call ran but its output does not contain `expected` outside the echoes of
                        its own arguments (what the reward counts, `matching.answer_in_output`)
- determinism           the golden calls, replayed again in a fresh session at least
                        `DETERMINISM_GAP_S` later, gave a different output (random ids, clocks):
                        the environment's answers cannot be reproduced, so the reward cannot trust them

Replay runs each environment's golden calls in one sandbox session (the way an episode
calls them), environments concurrently, with a progress bar. Matching is
`env_registry.matching.answer_in_output` under the rule of the sub-question the call covers.
The determinism replay costs one more session per environment; an environment whose first
replay already failed is not replayed again. A family validated otherwise (`FAMILIES`, see
`env_registry.family_rules`: BFCL replays its ground-truth calls and has no QA trace) says what
it replays, which rules it waives and what its sandbox needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from astra_foundation.sandbox import Module, Program, SandboxConfig, SandboxPool
from env_registry.families import bfcl, tau
from env_registry.family_rules import DEFAULT as DEFAULT_RULES
from env_registry.family_rules import PLAIN_RL, PLAIN_RL_GENERATOR, FamilyRules, ReplayCall
from env_registry.matching import answer_in_output, answer_in_text
from env_registry.spec import AnswerRule, EnvSpec, ToolSpec, tool_module
from env_registry.structure import (
    Issues,
    Rule,
    ValidationIssue,
    check_structure,
)

# -- replay --------------------------------------------------------------------------------


def _rule_for(env: EnvSpec, tool: ToolSpec, expected: str) -> AnswerRule:
    for q in env.sub_questions:
        if q.tool == tool.name and answer_in_text(q.answer, expected, q.match):
            return q.match
    return AnswerRule()


# Families validated otherwise than by golden calls (see `env_registry.family_rules`).
FAMILIES: dict[str, FamilyRules] = {
    bfcl.GENERATOR: bfcl.VALIDATION,
    PLAIN_RL_GENERATOR: PLAIN_RL,
    tau.GENERATOR: tau.VALIDATION,
}

# Two replays this far apart see different values of any clock read in whole seconds; finer
# clocks and random ids differ anyway. A clock read in minutes or days can still slip through.
DETERMINISM_GAP_S = 1.0
_SHOWN = 160  # characters of each output shown around the first difference


def family_rules(env: EnvSpec) -> FamilyRules:
    return FAMILIES.get(env.provenance.generator, DEFAULT_RULES)


def _call_text(env: EnvSpec, call: ReplayCall) -> str:
    return f"{env.tools[call.tool].name}({', '.join(f'{k}={v!r}' for k, v in call.args.items())})"


async def replay_outputs(env: EnvSpec, sandbox: Any, calls: Sequence[ReplayCall]) -> list[Any]:
    """The `CallResult` of each call, in order, all run in one fresh sandbox session.
    `sandbox` implements `astra_foundation.sandbox.protocol.Sandbox`."""
    program = Program(tuple(Module(name=tool_module(t.name, env.id), source=t.source) for t in env.tools))
    session = await sandbox.open_session(program)
    try:
        out = []
        for c in calls:
            name = env.tools[c.tool].name
            out.append(await sandbox.call(session, tool_module(name, env.id), name, c.args))
        return out
    finally:
        await sandbox.close_session(session)


def replay_issues(env: EnvSpec, calls: Sequence[ReplayCall], results: Sequence[Any]) -> list[ValidationIssue]:
    """Failures, and outputs that miss their expected answer, from the results of `replay_outputs`."""
    out = Issues(env.id)
    for c, res in zip(calls, results, strict=True):
        tool = env.tools[c.tool]
        if not res.ok:
            kind = res.error_kind.value if res.error_kind else "error"
            message = f"{_call_text(env, c)} failed in the sandbox ({kind}): {res.message}"
            out.add(c.path, Rule.REPLAY_ERROR, message, c.golden_call)
        elif c.expected is not None and not answer_in_output(
            c.expected, res.text, c.args, _rule_for(env, tool, c.expected)
        ):
            shown = res.text if len(res.text) <= 300 else res.text[:300] + "..."
            message = (
                f"{_call_text(env, c)} output does not contain {c.expected!r} outside the echoes of its arguments: "
                f"{shown}"
            )
            out.add(c.path, Rule.REPLAY_MISMATCH, message, c.golden_call)
    return list(out)


def _around(text: str, at: int) -> str:
    start = max(0, at - _SHOWN // 4)
    head = "..." if start else ""
    tail = "..." if start + _SHOWN < len(text) else ""
    return head + text[start : start + _SHOWN] + tail


def determinism_issues(
    env: EnvSpec,
    calls: Sequence[ReplayCall],
    first: Sequence[Any],
    second: Sequence[Any],
    gap_s: float = DETERMINISM_GAP_S,
) -> list[ValidationIssue]:
    """One `determinism` issue per call whose observation differs between two replays
    (`replay_outputs` twice, `gap_s` apart), showing both outputs from where they part."""
    out = Issues(env.id)
    for c, a, b in zip(calls, first, second, strict=True):
        if a.text == b.text:
            continue
        at = next((k for k, (x, y) in enumerate(zip(a.text, b.text, strict=False)) if x != y), None)
        at = min(len(a.text), len(b.text)) if at is None else at
        out.add(
            c.path,
            Rule.DETERMINISM,
            f"{_call_text(env, c)} gave different outputs in two fresh sessions {gap_s:g}s apart, so its answer "
            f"cannot be reproduced (random ids, clocks?); first {_around(a.text, at)!r}, "
            f"then {_around(b.text, at)!r} (they differ from character {at})",
            c.golden_call,
        )
    return list(out)


async def replay_env(env: EnvSpec, sandbox: Any) -> list[ValidationIssue]:
    """Run the environment's replay calls (its golden calls, or what its family replays) once in
    one fresh sandbox session; issues for failures and outputs that miss their answer."""
    calls = family_rules(env).replay_calls(env)
    return replay_issues(env, calls, await replay_outputs(env, sandbox, calls))


async def replay_envs(
    envs: Sequence[EnvSpec],
    sandbox: Any,
    *,
    concurrency: int = 32,
    bar: Any = None,
    determinism: bool = True,
    gap_s: float = DETERMINISM_GAP_S,
) -> dict[str, list[ValidationIssue]]:
    """Replay many environments concurrently (at most `concurrency` sessions open at once).
    With `determinism`, an environment whose replay passed is replayed once more in a fresh
    session, no sooner than `gap_s` after the first ended, and compared call by call. The wait
    holds no session slot: other environments' replays fill it, so a run costs about `gap_s`
    once, not per environment."""
    sem = asyncio.Semaphore(concurrency)
    results: dict[str, list[ValidationIssue]] = {}

    async def one(env: EnvSpec) -> None:
        try:
            calls = family_rules(env).replay_calls(env)
            async with sem:
                first = await replay_outputs(env, sandbox, calls)
            done = time.monotonic()
            issues = replay_issues(env, calls, first)
            if determinism and not issues:
                await asyncio.sleep(max(0.0, done + gap_s - time.monotonic()))
                async with sem:
                    second = await replay_outputs(env, sandbox, calls)
                issues = determinism_issues(env, calls, first, second, gap_s)
            results[env.id] = issues
        except Exception as exc:  # a sandbox fault must not hide the other environments' results
            results[env.id] = [
                ValidationIssue(env.id, "tools", Rule.REPLAY_ERROR, f"replay aborted: {type(exc).__name__}: {exc}")
            ]
        if bar is not None:
            bar.update(1)

    await asyncio.gather(*(one(e) for e in envs))
    return results


# -- reports -------------------------------------------------------------------------------


@dataclass
class ValidationReport:
    checked: int = 0
    replayed: int = 0
    determinism: bool = False  # whether sound environments were replayed a second time
    issues: dict[str, list[ValidationIssue]] = field(default_factory=dict)  # env id -> issues (failing envs only)

    @property
    def failed(self) -> list[str]:
        return list(self.issues)

    @property
    def ok(self) -> bool:
        return not self.issues

    def by_rule(self) -> Counter:
        return Counter(i.rule.value for issues in self.issues.values() for i in issues)

    def all_issues(self) -> list[ValidationIssue]:
        return [i for issues in self.issues.values() for i in issues]


async def validate_stream(
    envs: Iterable[EnvSpec],
    *,
    replay: bool = True,
    sandbox: Any = None,
    concurrency: int = 32,
    chunk: int = 1024,
    total: int | None = None,
    progress: bool = True,
    determinism: bool = True,
) -> ValidationReport:
    """Structure of every environment (less the rules its family waives), then replay of the
    structurally sound ones (twice with `determinism`), `chunk` environments at a time (memory
    stays bounded on large stores). Without a `sandbox`, replay starts the project's
    `SandboxPool`, one per sandbox setting the families in the run need."""
    report = ValidationReport(determinism=replay and determinism)
    desc = "validate (structure + replay)" if replay else "validate (structure)"
    async with contextlib.AsyncExitStack() as stack:
        pools = _Pools(stack, sandbox)
        with tqdm(total=total, desc=desc, unit="env", disable=not progress) as bar:
            batch: list[EnvSpec] = []
            for env in envs:
                batch.append(env)
                if len(batch) >= chunk:
                    await _validate_batch(batch, report, replay, pools, concurrency, bar)
                    batch = []
            await _validate_batch(batch, report, replay, pools, concurrency, bar)
    return report


class _Pools:
    """The sandbox each family replays in: the caller's, or a project pool per distinct sandbox
    setting (`FamilyRules.sandbox`), started on first use and closed with the run."""

    def __init__(self, stack: contextlib.AsyncExitStack, given: Any):
        self.stack, self.given, self.started = stack, given, {}

    def key(self, env: EnvSpec) -> str:
        return json.dumps(family_rules(env).sandbox, sort_keys=True)

    async def get(self, key: str) -> Any:
        if self.given is not None:
            return self.given
        if key not in self.started:
            self.started[key] = await self.stack.enter_async_context(default_sandbox(json.loads(key)))
        return self.started[key]


async def _validate_batch(batch, report: ValidationReport, replay: bool, pools: _Pools, concurrency: int, bar) -> None:
    by_pool: dict[str, list[EnvSpec]] = {}
    for env in batch:
        waives = family_rules(env).waives
        issues = [i for i in check_structure(env) if not waives(i.rule.value, i.field)]
        if issues:
            report.issues[env.id] = issues
            bar.update(1)
        else:
            by_pool.setdefault(pools.key(env), []).append(env)
    report.checked += len(batch)
    for key, sound in by_pool.items():
        if not replay:
            bar.update(len(sound))
            continue
        sandbox = await pools.get(key)
        replayed = await replay_envs(sound, sandbox, concurrency=concurrency, bar=bar, determinism=report.determinism)
        report.replayed += len(sound)
        report.issues.update({env_id: issues for env_id, issues in replayed.items() if issues})


def validate_envs(envs: Iterable[EnvSpec], **kw: Any) -> ValidationReport:
    """Synchronous `validate_stream` (for scripts and the CLI; not from inside a running loop)."""
    return asyncio.run(validate_stream(envs, **kw))


def default_sandbox(settings: dict[str, Any] | None = None) -> Any:
    """The project's sandbox pool (an async context manager) with `SandboxConfig` fields `settings`."""
    return SandboxPool(SandboxConfig(**(settings or {})))
