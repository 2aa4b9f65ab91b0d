"""Step 3: four-way verification and the quality threshold (docs/method.md §2.3).

`Verify` (input `Labeled`, output `Scored`) asks four LLM judges at once, each about one
property, and scores each as the fraction of steps that pass it:
- dependency:   per step, no missing and no redundant dependency;
- atomicity:    per step, answerable by one API call;
- sequential:   per dependent step, well placed (1.0 when no step has a dependency);
- completeness: mean of `covers_question` and `answer_follows`.
Quality is the mean of the four. A judge reply that names unknown steps or skips steps goes
through the repair round, then `env.verify.<judge>:<kind>`.

`Select` (input `Scored`, output `Selected`) keeps an instance when its quality is at least
the threshold, which the caller computes with `quality_threshold` over the run's whole score
distribution: the `percentile`-th percentile, floored at `min_quality`. ASTRA's README keeps
P90 (the default here); its scripts pass 0.85 as the cut-off. Both are flags. The threshold
and the population it came from are stored in every record: select decisions are final,
so records scored after a resumed run's select are judged against the distribution of then.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from astra_foundation.llm.extract import ReplyError
from data_synth.env.context import EnvContext
from data_synth.env.records import JudgeScores, Labeled, Scored, Selected, TraceNode
from data_synth.env.trace import render_trace
from data_synth.pipeline import Reject, Step
from data_synth.prompts import load_prompt

PROMPT = "env/verify"
JUDGES = ("dependency", "atomicity", "sequential", "completeness")


def _node_items(value: Any, expected: list[str], judge: str) -> list[dict[str, Any]]:
    items = value.get("nodes") if isinstance(value, dict) else None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ReplyError("wrong_keys", 'expected {"nodes": [{"_uuid": ..., ...}, ...]}')
    seen = [str(i.get("_uuid", i.get("id", ""))) for i in items]
    unknown = sorted(set(seen) - set(expected))
    missing = [i for i in expected if i not in seen]
    if unknown:
        raise ReplyError("unknown_id", f"{judge}: {unknown} are not steps to judge (judge exactly {expected})")
    if missing:
        raise ReplyError("missing_ids", f"{judge}: no verdict for steps {missing}")
    return items


def _flag(item: dict[str, Any], field: str) -> bool:
    value = item.get(field)
    if not isinstance(value, bool):
        raise ReplyError("wrong_keys", f"step {item.get('_uuid')!r}: `{field}` must be true or false, got {value!r}")
    return value


def _ids(raw: Any, field: str, node: str) -> list[str]:
    if raw in (None, ""):
        return []
    if not isinstance(raw, list):
        raise ReplyError("wrong_keys", f"step {node!r}: `{field}` must be a list of step ids")
    return [str(x) for x in raw]


def score_dependency(value: Any, nodes: list[TraceNode]) -> tuple[float, list[str]]:
    ids = [n.id for n in nodes]
    items = _node_items(value, ids, "dependency")
    by_id = {n.id: n for n in nodes}
    issues = []
    for item in items:
        node = str(item.get("_uuid", item.get("id")))
        missing = [m for m in _ids(item.get("missing"), "missing", node) if m != node]
        redundant = _ids(item.get("redundant"), "redundant", node)
        unknown = sorted(set(missing + redundant) - set(ids))
        if unknown:
            raise ReplyError("unknown_id", f"step {node!r}: {unknown} are not step ids")
        not_listed = sorted(set(redundant) - set(by_id[node].depends_on))
        if not_listed:
            raise ReplyError("failed_check", f"step {node!r}: {not_listed} are called redundant but are not listed")
        missing = [m for m in missing if m not in by_id[node].depends_on]
        if missing or redundant:
            issues.append(f"{node}: missing {missing}, redundant {redundant}")
    return 1 - len(issues) / len(ids), issues


def score_flags(value: Any, expected: list[str], judge: str, field: str) -> tuple[float, list[str]]:
    if not expected:
        return 1.0, []
    items = _node_items(value, expected, judge)
    issues = [f"{item.get('_uuid')}: {item.get('reason', '')}".strip() for item in items if not _flag(item, field)]
    return 1 - len(issues) / len(expected), issues


def score_completeness(value: Any) -> tuple[float, list[str]]:
    if not isinstance(value, dict):
        raise ReplyError("wrong_keys", 'expected {"covers_question": bool, "answer_follows": bool, "reason": ...}')
    covers, follows = _flag(value, "covers_question"), _flag(value, "answer_follows")
    issues = [] if covers and follows else [str(value.get("reason", ""))]
    return (covers + follows) / 2, issues


class Verify(Step[Labeled, Scored]):
    name = "env.verify"
    input_type = Labeled
    output_type = Scored

    def __init__(self, temperature: float = 0.0):
        self.temperature = temperature

    async def _judge(self, judge: str, record: Labeled, ctx: EnvContext) -> tuple[float, list[str]]:
        nodes = record.nodes
        dependent = [n.id for n in nodes if n.depends_on]
        checks = {
            "dependency": lambda v: score_dependency(v, nodes),
            "atomicity": lambda v: score_flags(v, [n.id for n in nodes], "atomicity", "atomic"),
            "sequential": lambda v: score_flags(v, dependent, "sequential", "order_ok"),
            "completeness": score_completeness,
        }
        if judge == "sequential" and not dependent:
            return 1.0, []  # nothing waits on anything: nothing can be mis-ordered
        messages = load_prompt(PROMPT).messages(
            f"user.{judge}",
            question=record.question,
            final_answer=record.final_answer,
            trace=render_trace(nodes),
        )
        reply = await ctx.llm.complete_json(
            messages,
            step=f"{self.name}.{judge}",
            check=checks[judge],
            sample=record.seed.sample,
            temperature=self.temperature,
        )
        return reply.value

    async def process(self, record: Labeled, ctx: EnvContext) -> Scored:
        results = await asyncio.gather(*(self._judge(j, record, ctx) for j in JUDGES))
        scores = JudgeScores(
            **{j: round(s, 6) for j, (s, _) in zip(JUDGES, results, strict=True)},
            issues={j: issues for j, (_, issues) in zip(JUDGES, results, strict=True) if issues},
        )
        return Scored(
            **record.model_dump(exclude={"prompts"}),
            prompts={**record.prompts, self.name: load_prompt(PROMPT).tag},
            scores=scores,
            quality=round(scores.mean, 6),
        )


def quality_threshold(qualities: list[float], *, percentile: float, min_quality: float = 0.0) -> float:
    """The keep threshold: the `percentile` (0..100) of the scores, floored at `min_quality`."""
    if not 0 <= percentile <= 100:
        raise ValueError(f"percentile must be in [0, 100], got {percentile}")
    if not qualities:
        return min_quality
    return max(min_quality, float(np.percentile(np.asarray(qualities, dtype=float), percentile)))


class Select(Step[Scored, Selected]):
    name = "env.select"
    input_type = Scored
    output_type = Selected

    def __init__(self, threshold: float, population: int, percentile: float):
        self.threshold = threshold
        self.population = population
        self.percentile = percentile

    async def process(self, record: Scored, ctx: EnvContext) -> Selected:
        if record.quality + 1e-9 < self.threshold:
            raise Reject(
                "below_quality_threshold",
                f"quality {record.quality:.3f} < {self.threshold:.3f} (P{self.percentile:g} of {self.population} scores)",
            )
        return Selected(**record.model_dump(), threshold=self.threshold, population=self.population)
