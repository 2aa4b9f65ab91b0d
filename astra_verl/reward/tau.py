"""τ-bench's reward as an astra reward variant: pure functions, no sandbox, no verl.

τ-bench (`Env.calculate_reward`) scores an episode 1.0 when both hold, else 0.0:

- r_actions: the database after the agent's calls equals the database after the task's gold
  actions replayed on a fresh copy (τ-bench compares hashes; we compare
  `tau_sandbox.state_digest`s, which agree with τ-bench's hashes task by task: the agreement test);
- r_outputs (only when the task lists outputs): every required output occurs in some message the
  agent sent the user, compared lower-cased with commas removed from the message.

The digests come from a sandbox replay (`env_registry.families.tau.replay_digests`); the gold one
is stored in the row's `TauTarget`. `tau_score` takes them as plain values.

Ablation: `mixed_reward` combines τ-bench's reward with our F1 (`f1.precision_recall_f1`) where
the task's gold tool actions play the sub-questions and an agent call solves one when its name
and arguments equal the action's (each gold action solved at most once); precision charges every
call the agent made, as in ASTRA's F1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from astra_verl.reward.f1 import DEFAULT_EPS, precision_recall_f1
from env_registry.call_gate import CallStatus

Action = tuple[str, dict[str, Any]]


def outputs_found(outputs: Sequence[str], responses: Sequence[str]) -> dict[str, bool]:
    """Per required output: whether some response contains it (τ-bench's rule)."""
    said = [r.lower().replace(",", "") for r in responses]
    return {o: any(o.lower() in s for s in said) for o in outputs}


@dataclass(frozen=True)
class TauScore:
    reward: float  # τ-bench's: r_actions * r_outputs
    r_actions: float
    r_outputs: float  # 1.0 when the task requires no output
    outputs: dict[str, bool]

    def extra_info(self) -> dict[str, float]:
        """Flat, numeric, the same keys for every sample (verl stacks them over the batch)."""
        return {
            "tau_reward": self.reward,
            "tau_r_actions": self.r_actions,
            "tau_r_outputs": self.r_outputs,
            "tau_outputs_required": float(len(self.outputs)),
        }


def tau_score(digest: str, gold_digest: str, outputs: Sequence[str], responses: Sequence[str]) -> TauScore:
    """τ-bench's reward of an episode whose database digest is `digest` and whose messages to the
    user were `responses`, for a task with `gold_digest` and required `outputs`."""
    r_actions = 1.0 if digest == gold_digest else 0.0
    found = outputs_found(outputs, responses)
    r_outputs = 1.0 if all(found.values()) else 0.0
    return TauScore(reward=r_actions * r_outputs, r_actions=r_actions, r_outputs=r_outputs, outputs=found)


def action_f1(calls: Sequence[Action], gold: Sequence[Action], eps: float = DEFAULT_EPS) -> tuple[float, float, float]:
    """(precision, recall, f1) of the agent's `calls` against the task's `gold` tool actions (see
    the module docstring)."""
    if not gold:  # nothing to solve: every call is surplus
        return (1.0, 1.0, 1.0) if not calls else (0.0, 1.0, 0.0)
    remaining = [(name, kwargs) for name, kwargs in gold]
    solved = 0
    for call in calls:
        if call in remaining:
            remaining.remove(call)
            solved += 1
    return precision_recall_f1(len(gold), solved, len(calls), eps)


def mixed_reward(tau: TauScore, f1: float, f1_weight: float) -> float:
    """(1 - f1_weight) * τ-bench's reward + f1_weight * F1; f1_weight 0 is τ-bench's reward alone."""
    if not 0.0 <= f1_weight <= 1.0:
        raise ValueError(f"f1_weight must be within [0, 1], got {f1_weight}")
    return (1.0 - f1_weight) * tau.reward + f1_weight * f1


def episode_actions(calls: Sequence[Any], terminate_tools: Sequence[str]) -> list[Action]:
    """The tool actions an episode took, as τ-bench's Env would have stepped them: each call the
    sandbox ran (`CallRecord.ok`; a rejected call never reached a tool), in order, up to the
    first attempt of a terminate tool (the episode ends there, as in τ-bench, even when that
    call failed: `ends_episode`), included when it ran."""
    out: list[Action] = []
    for call in calls:
        if call.ok:
            out.append((call.tool, dict(call.arguments)))
        if ends_episode(call, terminate_tools):
            break
    return out


def ends_episode(call: Any, terminate_tools: Sequence[str] | set[str]) -> bool:
    """A call that ends a τ-bench episode: any attempt of a terminate tool τ-bench would have
    stepped (its `Env.step` sets `done` for a known tool whatever the call returned), so not an
    unknown (unshown) tool nor a call past the parallel cap, which never ran."""
    return call.tool in terminate_tools and call.status not in (CallStatus.UNKNOWN_TOOL, CallStatus.SKIPPED)
