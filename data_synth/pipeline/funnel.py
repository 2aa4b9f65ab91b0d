"""The funnel of a run: per step, records in and out and why the rest fell out.

Computed from the step files on disk, so it is the same after a resumed run as after an
uninterrupted one. For a linear pipeline, a step's `inputs` is the previous step's output
count (the first step's is given), and `pending = inputs - processed` shows unfinished work.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from pydantic import BaseModel, Field

from astra_foundation.llm.types import StepUsage
from data_synth.pipeline.store import read_envelopes


class StepCounts(BaseModel):
    step: str
    inputs: int | None = None
    processed: int = 0
    ok: int = 0
    rejected: int = 0
    error: int = 0
    outputs: int = 0
    rejection_reasons: dict[str, int] = Field(default_factory=dict)
    error_reasons: dict[str, int] = Field(default_factory=dict)
    usage: StepUsage = Field(default_factory=StepUsage)
    elapsed_s: float = 0.0

    @property
    def pending(self) -> int | None:
        return None if self.inputs is None else max(0, self.inputs - self.processed)


class Funnel(BaseModel):
    steps: list[StepCounts]

    @classmethod
    def from_run(cls, run_dir: str | Path, steps: list[str], *, first_inputs: int | None = None) -> Funnel:
        counts: list[StepCounts] = []
        for i, name in enumerate(steps):
            c = StepCounts(step=name, inputs=first_inputs if i == 0 else counts[-1].outputs)
            rejected: Counter[str] = Counter()
            errors: Counter[str] = Counter()
            for env in read_envelopes(run_dir, name).values():
                c.processed += 1
                setattr(c, env.status, getattr(c, env.status) + 1)
                if env.status == "ok":
                    c.outputs += len(env.out)
                elif env.status == "rejected":
                    rejected[env.reason or "unspecified"] += 1
                else:
                    errors[env.reason or "unspecified"] += 1
                if "usage" in env.meta:
                    c.usage.add(StepUsage.model_validate(env.meta["usage"]))
                c.elapsed_s += float(env.meta.get("elapsed_s", 0.0))
            c.rejection_reasons = dict(rejected.most_common())
            c.error_reasons = dict(errors.most_common())
            counts.append(c)
        return cls(steps=counts)

    def table(self) -> str:
        """A one-screen text table."""
        header = f"{'step':<22}{'in':>8}{'ok':>8}{'rejected':>10}{'error':>8}{'pending':>9}{'out':>8}{'LLM calls':>11}"
        rows = [header, "-" * len(header)]
        for c in self.steps:
            pending = "" if c.pending is None else str(c.pending)
            inputs = "" if c.inputs is None else str(c.inputs)
            rows.append(
                f"{c.step:<22}{inputs:>8}{c.ok:>8}{c.rejected:>10}{c.error:>8}{pending:>9}{c.outputs:>8}"
                f"{c.usage.completions:>11}"
            )
            for reason, n in list(c.rejection_reasons.items())[:6]:
                rows.append(f"{'':<4}rejected {n:>6}  {reason}")
            for reason, n in list(c.error_reasons.items())[:3]:
                rows.append(f"{'':<4}error    {n:>6}  {reason}")
        return "\n".join(rows)

    def save(self, path: str | Path) -> None:
        path = Path(path)
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.model_dump(mode="json"), indent=2), encoding="utf-8")
        tmp.replace(path)
