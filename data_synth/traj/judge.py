"""Reward filter (step 7, docs/method.md §1.6): seven LLM-judged dimensions, each in [0, 1], mean = score.

Fail closed (**fix**: the released scripts score a judge error 1.0 and a failed call 0.5):
- a judgement that does not parse, lacks a dimension, or has a value outside [0, 1] (or a
  boolean) goes back to the judge once (repair round) and then rejects the trajectory with the
  reason (`traj.judge:<kind>`); no number is ever made up;
- with `samples > 1` every sample must be usable, and the dimensions are averaged;
- tool-call success is whatever the judge says: no fixed credit for failed calls.

One rule is applied on top, not left to the judge (ASTRA: "an answer URL absent from the
trajectory scores 0"): a URL in the final answer that appears nowhere earlier in the
conversation sets `final_answer_quality` to 0, recorded in `overrides`.

A trajectory is kept when `score >= threshold` and every dimension reaches its entry in
`min_per_dim` (none by default).

A trajectory of another behaviour (`variants.py`: unanswerable, missing_value, missing_function)
first meets that behaviour's rules (`variants.violation`, applied by the step: a break rejects it
without asking the judge), then the same seven dimensions under `traj/judge_variant`, which
states the right behaviour; the judge sees the tools the agent was offered.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import Field, model_validator

from astra_foundation.llm import LLMClient
from astra_foundation.strict import StrictModel
from data_synth.prompts import load_prompt
from data_synth.traj import describe
from data_synth.traj import variants as variants_mod
from data_synth.traj.records import Judgement, Server, Trajectory
from env_registry.spec import Variant

DIMENSIONS = (
    "query_understanding",
    "initial_plan",
    "tool_response_understanding",
    "intermediate_planning",
    "tool_call_success",
    "conciseness",
    "final_answer_quality",
)
_URL = re.compile(r"https?://[^\s)\]>\"'`]+")
_MAX_TURN_CHARS = 2000


class JudgeConfig(StrictModel):
    section = "judge"

    threshold: float = 0.7
    min_per_dim: dict[str, float] = Field(default_factory=dict)
    samples: int = 1
    temperature: float | None = 0.0

    @model_validator(mode="after")
    def _check(self) -> JudgeConfig:
        unknown = set(self.min_per_dim) - set(DIMENSIONS)
        if unknown:
            raise ValueError(f"unknown judge dimensions {sorted(unknown)}; known: {DIMENSIONS}")
        if self.samples < 1:
            raise ValueError("samples must be >= 1")
        return self


def transcript(traj: Trajectory) -> str:
    """The conversation as numbered text (system prompt left out: it is the same for all)."""
    lines = []
    for i, m in enumerate(traj.messages):
        role = m["role"]
        if role == "system":
            continue
        content = (m.get("content") or "")[:_MAX_TURN_CHARS]
        if role == "assistant" and m.get("tool_calls"):
            calls = "; ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in m["tool_calls"])
            lines.append(f"[{i}] assistant: {content} -> calls: {calls}".replace(":  ->", ": ->"))
        elif role == "tool":
            lines.append(f"[{i}] tool {m.get('name', '')} ({m.get('tool_call_id', '')}): {content}")
        else:
            lines.append(f"[{i}] {role}: {content}")
    return "\n".join(lines)


def unsupported_urls(traj: Trajectory) -> list[str]:
    """URLs in the final answer that no earlier message contains."""
    earlier = "\n".join((m.get("content") or "") + json.dumps(m.get("tool_calls") or []) for m in traj.messages[:-1])
    return [u for u in _URL.findall(traj.final_answer) if u.rstrip(".,;:") not in earlier]


def parse_scores(value: Any) -> tuple[dict[str, float], str]:
    scores = value.get("scores") if isinstance(value, dict) else None
    if not isinstance(scores, dict):
        raise ValueError('expected {"scores": {<dimension>: number, ...}, "reason": "..."}')
    missing = [d for d in DIMENSIONS if d not in scores]
    if missing:
        raise ValueError(f"missing dimensions {missing}")
    out = {}
    for d in DIMENSIONS:
        v = scores[d]
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= float(v) <= 1.0:
            raise ValueError(f"{d}={json.dumps(v)} is not a number in [0, 1]")
        out[d] = float(v)
    return out, str(value.get("reason", ""))[:500]


def _messages(server: Server, traj: Trajectory) -> list[dict[str, Any]]:
    """The judge's request: the base prompt, or for another behaviour the prompt that states it."""
    tools = describe.tool_list(variants_mod.offered(server, traj.task).tools, io=False)
    if traj.task.behaviour is Variant.ANSWERABLE:
        return load_prompt("traj/judge_trajectory").messages("user", tool_list=tools, transcript=transcript(traj))
    return load_prompt("traj/judge_variant").messages(
        "user", tool_list=tools, transcript=transcript(traj), behaviour=variants_mod.behaviour(traj.task)
    )


async def judge(client: LLMClient, server: Server, traj: Trajectory, cfg: JudgeConfig) -> Judgement:
    """The judgement; `LLMOutputError` when any sample is unusable (fail closed)."""
    messages = _messages(server, traj)
    samples = []
    for sample in range(cfg.samples):
        reply = await client.complete_json(
            messages, step="traj.judge", check=parse_scores, sample=sample, temperature=cfg.temperature
        )
        samples.append(reply.value)
    scores = {d: sum(s[d] for s, _ in samples) / len(samples) for d in DIMENSIONS}
    overrides = []
    urls = unsupported_urls(traj)
    if urls:
        scores["final_answer_quality"] = 0.0
        overrides.append(f"final_answer_quality=0: URLs not in the conversation: {urls[:3]}")
    return Judgement(
        scores={d: round(v, 4) for d, v in scores.items()},
        score=round(sum(scores.values()) / len(DIMENSIONS), 4),
        reason=samples[0][1],
        overrides=overrides,
    )


def failing(j: Judgement, cfg: JudgeConfig) -> list[str]:
    """Why a judgement does not pass ([] when it does)."""
    out = [f"score {j.score:.3f} < {cfg.threshold:g}"] if j.score < cfg.threshold else []
    out += [f"{d}={j.scores[d]:g}<{t:g}" for d, t in cfg.min_per_dim.items() if j.scores[d] < t]
    return out
