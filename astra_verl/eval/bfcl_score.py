"""Scoring an episode with BFCL's own multi-turn checker, run inside the sandbox.

BFCL's checker (`multi_turn_checker`) re-executes the model's calls, and its executor `eval`s
call strings built from model output: model-written code. It therefore never runs in the
trainer or evaluation process. Each scoring opens a fresh sandbox session whose program is
`CHECKER_SOURCE`, which imports the checker from the installed `bfcl_eval` package (the pool
must expose it: `astra.sandbox.packages: [bfcl_eval, mpmath]`). BFCL caches API instances in
its executor's module globals, keyed by model name and entry id; in a fresh session that cache
starts empty and dies with the session, so no two scorings share state.

Input, as BFCL's evaluation runner builds it (`_evaluate_single_multi_turn_entry`):
- per user turn, per step (assistant turn) that has calls, the decoded calls as strings
  `name(arg=repr(value),...)` (BFCL's `convert_to_function_call` format). An episode's calls
  come from its `EpisodeLog`; the hook's final state says which assistant turns belong to which
  user turn. Every call the model wrote as parsable JSON is included, also those our loop refused
  to run (unknown tool, schema violation): BFCL executes them all. Unparsable calls and calls
  past `max_parallel_calls` (never executed) are not.
- the rows must come from the installed bfcl-eval version (`BfclTarget.bfcl_version`): its
  classes and checker judge the episode.
- BFCL's force-termination rule first: an episode that did not reach the last user turn fails
  (`multi_turn:force_terminated` after the hook's step limit, as BFCL; `astra:episode_truncated`
  when the loop stopped it: response length, turn limits).

Verdict: BFCL's `valid`, `error_type` and `error_message` (details capped at
`DETAIL_CHARS`). A checker run that fails because of what the model's calls do (timeout,
memory, an exception in BFCL's checker) is a failed verdict with error type
`astra:checker_<kind>`; a sandbox that cannot load the checker raises `BfclScoringError`.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import asdict, dataclass
from typing import Any

from astra_verl.rollout.call_log import CallStatus, EpisodeLog, Termination
from astra_verl.rollout.config import sandbox_settings
from astra_verl.sandbox.protocol import ErrorKind, Module, Program, Sandbox
from env_registry.families.bfcl import BfclTarget, bfcl_version

CHECKER_MODULE = "bfcl_checker"
MODEL_NAME = "astra"  # the model name BFCL's executor keys its instance cache by (inside the session)
DETAIL_CHARS = 4000
REQUIRED_PACKAGES = ("bfcl_eval", "mpmath")
DECODED_STATUSES = frozenset({CallStatus.OK, CallStatus.TOOL_ERROR, CallStatus.SCHEMA_ERROR, CallStatus.UNKNOWN_TOOL})

CHECKER_SOURCE = f'''"""BFCL's multi-turn checker and executor, run on model-written calls inside the sandbox."""

import json

from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call


def _short(value):
    text = value if isinstance(value, str) else json.dumps(value, default=repr, ensure_ascii=False)
    return text if len(text) <= {DETAIL_CHARS} else text[:{DETAIL_CHARS}] + "...(truncated)"


def check(decoded, ground_truth, entry, category, model_name):
    result = multi_turn_checker(decoded, ground_truth, entry, category, model_name)
    if result.get("valid"):
        return {{"valid": True}}
    rest = {{k: v for k, v in result.items() if k not in ("valid", "error_type", "error_message")}}
    return {{
        "valid": False,
        "error_type": str(result.get("error_type") or "multi_turn:unknown"),
        "error_message": _short(str(result.get("error_message") or "")),
        "details": _short(rest) if rest else "",
    }}


def execute(steps, entry, long_context, model_name):
    """BFCL's executor over consecutive steps of one run (what BFCL's inference loop returns)."""
    out = []
    for calls in steps:
        results, _ = execute_multi_turn_func_call(
            calls, entry["initial_config"], entry["involved_classes"], model_name, entry["id"], long_context=long_context
        )
        out.append(results)
    return out
'''


class BfclScoringError(RuntimeError):
    """The checker could not run at all (infrastructure or configuration, not the model)."""


def checker_program() -> Program:
    return Program((Module(CHECKER_MODULE, CHECKER_SOURCE),))


def call_string(name: str, arguments: dict[str, Any]) -> str:
    """A call in BFCL's decoded form, `name(k=repr(v),...)`."""
    return f"{name}({','.join(f'{k}={v!r}' for k, v in arguments.items())})"


def decode_episode(log: EpisodeLog) -> list[list[list[str]]]:
    """Per delivered user turn, per step with calls, the decoded call strings (see module docstring)."""
    state = log.hook_state
    starts = state.get("turn_starts")
    if not isinstance(starts, list) or not starts:
        raise BfclScoringError(
            f"episode of env {log.env_id} has no turn_starts in its hook state (hook {log.hook!r}); "
            "BFCL rows must run with the bfcl_multi_turn hook"
        )
    turns: list[list[list[str]]] = [[] for _ in starts]
    last_step: list[int | None] = [None] * len(starts)
    for record in log.calls:
        if record.status not in DECODED_STATUSES or not record.tool or not isinstance(record.arguments, dict):
            continue
        t = bisect.bisect_right(starts, record.turn) - 1
        if t < 0:
            continue
        if last_step[t] != record.turn:
            turns[t].append([])
            last_step[t] = record.turn
        turns[t][-1].append(call_string(record.tool, record.arguments))
    return turns


@dataclass
class BfclVerdict:
    valid: bool
    error_type: str | None = None
    error_message: str = ""
    details: str = ""
    turns_total: int = 0
    turns_delivered: int = 0
    steps: int = 0
    calls: int = 0
    force_quit: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def extra_info(self) -> dict[str, float]:
        """Numeric, the same keys for every sample (verl aggregates them per data source)."""
        kind = self.error_type or ""
        return {
            "bfcl_valid": float(self.valid),
            "bfcl_force_quit": float(self.force_quit),
            "bfcl_truncated": float(kind == "astra:episode_truncated"),
            "bfcl_state_mismatch": float(kind == "multi_turn:instance_state_mismatch"),
            "bfcl_response_mismatch": float(kind == "multi_turn:execution_response_mismatch"),
            "bfcl_empty_turn": float(kind == "multi_turn:empty_turn_model_response"),
            "bfcl_checker_error": float(kind.startswith("astra:checker_")),
            "bfcl_turns": float(self.turns_delivered),
            "bfcl_steps": float(self.steps),
            "bfcl_calls": float(self.calls),
        }


def precheck(target: BfclTarget, log: EpisodeLog) -> BfclVerdict:
    """The counts of a verdict, and BFCL's force-termination rule (`valid` True when it passes)."""
    if log.env_id != target.env_id:
        raise BfclScoringError(f"the episode ran env {log.env_id!r} but the ground truth is for {target.env_id!r}")
    if target.bfcl_version != bfcl_version():
        raise BfclScoringError(
            f"{target.id}: the row was exported with bfcl-eval {target.bfcl_version}, but {bfcl_version()} is "
            "installed (its API classes and checker score the episode): re-export the rows or install that version"
        )
    state = log.hook_state
    delivered = int(state.get("turns_delivered", 0))
    total = len(target.ground_truth)
    verdict = BfclVerdict(
        valid=True,
        turns_total=total,
        turns_delivered=delivered,
        steps=int(sum(state.get("steps_per_turn") or [])),
        calls=sum(1 for c in log.calls if c.status in DECODED_STATUSES),
        force_quit=bool(state.get("force_quit")),
    )
    if delivered != total:
        verdict.valid = False
        if verdict.force_quit:
            verdict.error_type = "multi_turn:force_terminated"
            verdict.error_message = (
                f"Model was force-terminated during inference phase. The length of the model result turns "
                f"({delivered}) does not match the length of the ground truth turns ({total})."
            )
        else:
            reason = log.terminated_by.value if isinstance(log.terminated_by, Termination) else log.terminated_by
            verdict.error_type = "astra:episode_truncated"
            verdict.error_message = f"the episode ended ({reason}) after {delivered} of {total} user turns"
    return verdict


async def score_episode(sandbox: Sandbox, target: BfclTarget, log: EpisodeLog) -> BfclVerdict:
    """BFCL's verdict on one episode (the checker runs in a fresh session of `sandbox`)."""
    verdict = precheck(target, log)
    if not verdict.valid:
        return verdict
    decoded = decode_episode(log)
    args = {
        "decoded": decoded,
        "ground_truth": target.ground_truth,
        "entry": target.checker_entry(),
        "category": f"multi_turn_{target.category}",
        "model_name": MODEL_NAME,
    }
    result = await _run(sandbox, "check", args, target.id)
    if not result.ok:
        verdict.valid = False
        verdict.error_type = f"astra:checker_{result.error_kind.value if result.error_kind else 'error'}"
        verdict.error_message = result.message
        return verdict
    out = json.loads(result.output)
    verdict.valid = bool(out["valid"])
    verdict.error_type = out.get("error_type")
    verdict.error_message = out.get("error_message", "")
    verdict.details = out.get("details", "")
    return verdict


async def execute_steps(sandbox: Sandbox, target: BfclTarget, steps: list[list[str]]) -> list[list[str]]:
    """What BFCL's own executor returns for these steps, run in one fresh session (diagnostics)."""
    args = {
        "steps": steps,
        "entry": target.checker_entry(),
        "long_context": target.category == "long_context",
        "model_name": MODEL_NAME,
    }
    result = await _run(sandbox, "execute", args, target.id)
    if not result.ok:
        raise BfclScoringError(f"{target.id}: BFCL's executor failed in the sandbox: {result.message}")
    return json.loads(result.output)


async def _run(sandbox: Sandbox, function: str, args: dict[str, Any], entry_id: str):
    session = await sandbox.open_session(checker_program())
    try:
        result = await sandbox.call(session, CHECKER_MODULE, function, args)
    finally:
        await sandbox.close_session(session)
    if not result.ok and result.error_kind in (ErrorKind.LOAD_ERROR, ErrorKind.NOT_FOUND):
        raise BfclScoringError(
            f"{entry_id}: the sandbox cannot load BFCL's checker ({result.message}); the pool must expose "
            f"the packages {list(REQUIRED_PACKAGES)}: set astra.sandbox.packages: {list(REQUIRED_PACKAGES)}"
        )
    return result


def trainer_sandbox_config(trainer_config: Any) -> Any:
    """The `SandboxConfig` of a trainer config's `astra.sandbox` section (what the agent loop uses)."""
    return sandbox_settings(trainer_config)


def check_sandbox_config(config: Any) -> None:
    """Raise ValueError when a SandboxConfig cannot run BFCL's classes and checker."""
    missing = [p for p in REQUIRED_PACKAGES if p not in tuple(getattr(config, "packages", ()) or ())]
    if missing:
        raise ValueError(
            f"BFCL environments run BFCL's API classes and checker in the sandbox, which needs "
            f"astra.sandbox.packages to include {missing} (have {list(getattr(config, 'packages', ()))})"
        )
