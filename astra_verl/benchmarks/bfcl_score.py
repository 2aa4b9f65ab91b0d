"""Scoring an episode with BFCL's own multi-turn checker, run inside the sandbox.

BFCL's checker (`multi_turn_checker`) re-executes the model's calls, and its executor `eval`s
call strings built from model output: model-written code. It therefore never runs in the
trainer or evaluation process. Each scoring opens a fresh sandbox session whose program is
`CHECKER_SOURCE`, which imports the checker from the installed `bfcl_eval` package (the pool
must expose it: `astra.sandbox.packages: [bfcl_eval, mpmath]`). BFCL caches API instances in
its executor's module globals, keyed by model name and entry id; in a fresh session that cache
starts empty and dies with the session, so no two scorings share state.

Input, as BFCL's evaluation runner builds it (`_evaluate_single_multi_turn_entry`):
- per user turn, per step (assistant turn) that BFCL's handler decodes into at least one call,
  the decoded calls as strings `name(arg=repr(value),...)` (BFCL's `convert_to_function_call`
  format); a step BFCL cannot decode, or decodes to no call, is left out (and it ended BFCL's
  user turn at inference: the hook ends ours there too). An episode's calls come from its
  `EpisodeLog`; the hook's final state says which assistant turns belong to which user turn and
  which of BFCL's handlers the calls are decoded like (`CallStyle`, see `step_calls`). Every
  decoded call is included, also those our loop refused to run (unknown tool, schema
  violation) or never ran (past `max_parallel_calls`): BFCL executes them all. Prompt-style
  steps are decoded from the full generated text by `astra_bfcl_qwen` (docs/bfcl.md).
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
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from astra_foundation.sandbox.protocol import ErrorKind, Module, Program, Sandbox
from astra_verl.calls.call_log import CallRecord, EpisodeLog, Termination
from astra_verl.reward.episode_reward import EpisodeReward
from astra_verl.rollout.call_parsing import BFCL_DROPPED, BFCL_SKIPPED
from astra_verl.rollout.config import sandbox_settings
from env_registry.call_gate import CallStatus
from env_registry.families.bfcl import SANDBOX_PACKAGES, BfclTarget, bfcl_version

CHECKER_MODULE = "bfcl_checker"
MODEL_NAME = "astra"  # the model name BFCL's executor keys its instance cache by (inside the session)
DETAIL_CHARS = 4000
REQUIRED_PACKAGES = SANDBOX_PACKAGES


class CallStyle(str, Enum):
    """Which of BFCL's handlers an episode's calls are decoded like (the hook's `call_style`)."""

    PROMPT = "prompt"  # calls as <tool_call> blocks in the text (QwenFCHandler): astra_tool_agent
    FC = "fc"  # OpenAI function calling, one JSON argument string per call: the eval chat rollout


# Imported once by each sandbox worker (`astra.sandbox.preload`): BFCL's checker and the API class
# modules of the multi-turn categories. A session importing them itself pays 3-45 ms per episode.
PRELOAD_MODULES = (
    "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker",
    *(
        f"bfcl_eval.eval_checker.multi_turn_eval.func_source_code.{name}"
        for name in ("gorilla_file_system", "math_api", "message_api", "posting_api", "ticket_api",
                     "trading_bot", "travel_booking", "vehicle_control")
    ),
)  # fmt: skip

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


def step_calls(records: Sequence[CallRecord], style: CallStyle) -> list[str] | None:
    """The call strings BFCL's handler decodes from one step's calls, or None when it drops the
    step: its decoder raises, or finds no call (at inference that ends BFCL's user turn).

    - FC (BFCL's OpenAI-style handlers): `json.loads` of every argument string; one that fails
      or is not an object (`arguments: ""` included) raises, so one malformed call drops the step.
    - PROMPT (BFCL's Qwen FC handler): the step must have been parsed by `astra_bfcl_qwen`
      (`BfclQwenCalls`, BFCL's decoding of the full generated text): its records are BFCL's calls,
      in order; a block BFCL skips is marked `bfcl_skipped_block`, a step it drops
      `bfcl_dropped_step`. Records of another parser's malformed blocks raise `BfclScoringError`.
    Calls our loop did not run (past `max_parallel_calls`, unknown tools, schema violations) are
    included: BFCL runs every call it decodes.
    """
    calls: list[str] = []
    for record in records:
        malformed = record.status is CallStatus.BAD_JSON or (
            record.status is CallStatus.SKIPPED and record.error_kind is not None
        )
        if not malformed:
            try:
                calls.append(call_string(record.tool or "", record.arguments))
            except (RecursionError, ValueError, AttributeError):  # BFCL's formatting raises too: dropped
                return None
        elif style is CallStyle.FC or record.error_kind == BFCL_DROPPED:
            return None
        elif record.error_kind != BFCL_SKIPPED:
            raise BfclScoringError(
                f"a prompt-style step holds a block refused as {record.error_kind!r}, which is not how BFCL's "
                "QwenFCHandler decodes: run BFCL rows with astra.rollout.tool_parser=astra_bfcl_qwen "
                "(recipe astra_bfcl_eval sets it)"
            )
    return calls or None


def call_style(log: EpisodeLog) -> CallStyle:
    raw = log.hook_state.get("call_style")
    try:
        return CallStyle(raw)
    except ValueError:
        raise BfclScoringError(
            f"episode of env {log.env_id}: its hook state has call_style {raw!r}, not one of "
            f"{[s.value for s in CallStyle]}; episodes recorded before the hook stored it must be run again"
        ) from None


def episode_steps(log: EpisodeLog) -> list[tuple[int, list[CallRecord]]]:
    """(assistant turn, its call records) for each turn that has calls, in order."""
    steps: list[tuple[int, list[CallRecord]]] = []
    for record in log.calls:
        if not steps or steps[-1][0] != record.turn:
            steps.append((record.turn, []))
        steps[-1][1].append(record)
    return steps


def decode_episode(log: EpisodeLog) -> list[list[list[str]]]:
    """Per delivered user turn, per step BFCL decodes, its call strings (see module docstring)."""
    starts = log.hook_state.get("turn_starts")
    if not isinstance(starts, list) or not starts:
        raise BfclScoringError(
            f"episode of env {log.env_id} has no turn_starts in its hook state (hook {log.hook!r}); "
            "BFCL rows must run with the bfcl_multi_turn hook"
        )
    style = call_style(log)
    turns: list[list[list[str]]] = [[] for _ in starts]
    for turn, records in episode_steps(log):
        t = bisect.bisect_right(starts, turn) - 1
        calls = step_calls(records, style)
        if t >= 0 and calls is not None:
            turns[t].append(calls)
    return turns


@dataclass
class BfclVerdict:
    valid: bool
    error_type: str | None = None
    error_message: str = ""
    details: str = ""
    # BFCL's counts of user turns: the prompt's included (one per ground-truth entry)
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

    def as_reward(self) -> EpisodeReward:
        """What the astra_bfcl manager hands verl: 1 for a valid episode, 0 otherwise, and the counts."""
        return EpisodeReward(float(self.valid), self.extra_info())


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
    # BFCL counts the prompt's user turn (its ground truth has one entry per user turn); the
    # episode counts the turns after it (astra_verl.rollout.hooks.UserTurn).
    delivered = 1 + log.user_turns
    total = len(target.ground_truth)
    style = call_style(log)
    verdict = BfclVerdict(
        valid=True,
        turns_total=total,
        turns_delivered=delivered,
        steps=int(sum(state.get("steps_per_turn") or [])),
        calls=sum(len(step_calls(records, style) or []) for _, records in episode_steps(log)),
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
