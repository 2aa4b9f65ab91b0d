"""The table and the plot of `eval tau` runs (pure summaries of their results records).

One row per policy, domain and split (a record's task is `<domain>/<split>/<index>`, its policy
the run's label), so the runs of several domains and policies (`python -m astra_verl.eval
tau-report RUN_DIR...`) read as one table; two policies' episodes of one task are never counted
as two samples of it:

    tasks     tasks with all n samples scored (pass^k counts only those)
    pass^k    τ-bench's: the mean over tasks of C(c, k) / C(n, k), c of the task's n samples with reward 1
    db        share of episodes whose database equals the gold actions' (τ-bench's r_actions)
    outputs   share of episodes that told the user every required output (r_outputs; 1 when none)
    calls     tool calls per episode;  user   user turns per episode
    stop      share of episodes the user ended (`###STOP###`); the rest: a transfer, the turn or
              token limit
    s/ep      seconds per episode (wall time of the episode, concurrent episodes overlapping)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from math import comb
from pathlib import Path
from typing import Any, Literal

from astra_foundation.errors import UserError
from astra_foundation.strict import SettingsError
from astra_verl.eval import plotting
from astra_verl.eval.results import ResultRecord, ResultsFile

RESULTS_VERSION = 1


class TauResult(ResultRecord):
    """One scored episode of `eval tau`, a line of its `results.jsonl` (written by the run, read back
    by the table): the run's identity of the episode, τ-bench's reward and its parts, and how the
    episode ended. A file holds one policy on one domain and split (`run_key`)."""

    section = "eval tau results record"

    id: str  # "<task index>:<sample>" within the run
    version: Literal[1] = RESULTS_VERSION
    status: Literal["scored"] = "scored"
    task: str  # "<domain>/<split>/<index>"
    sample: int
    policy: str  # the run's label
    reward: float
    tau_reward: float
    tau_r_actions: float  # the database after the agent's calls equals the gold actions'
    tau_r_outputs: float  # every required output was told to the user (1 when none)
    tau_outputs_required: float
    tau_action_f1: float
    tau_calls: float
    tau_turns_after_prompt: float  # the user's turns after its opening message
    ended_by: str  # the hook's reason ("user_stop", "terminate_tool", ...) or "loop"
    terminated_by: str  # the agent loop's (max_turns, max_length, hook, ...)
    elapsed_s: float

    def run_key(self) -> dict[str, Any]:
        # the task's domain/split: the ids ("<index>:<sample>") of two domains' runs would collide
        return {"policy": self.policy, "tasks": group_of(self)}


def results_file(path: Path, policy: str | None = None, tasks: str | None = None, *, option: str = "--out"):
    """An `eval tau` results file at `path`; `policy` and `tasks` ("<domain>/<split>"): the run that
    appends (a file of another policy's or domain's is refused here), None to read."""
    run = None if policy is None else {"policy": policy, "tasks": tasks}
    return ResultsFile(path, TauResult, run=run, option=option)


class ReportError(UserError):
    """A results record that is not a `TauResult` (not written by `eval tau`, or by an older one):
    the message names the record and says to rerun into a fresh --out."""


def read_results(records: Iterable[dict[str, Any] | TauResult]) -> list[TauResult]:
    """The records as `TauResult`s (a `ResultsFile` of them reads its lines as such already); the
    first that is not one is named with what is wrong."""
    out = []
    for r in records:
        if isinstance(r, TauResult):
            out.append(r)
            continue
        try:
            out.append(TauResult(**r))
        except SettingsError as exc:
            where = f"results record {r.get('id', '?')} (task {r.get('task', '?')})"
            raise ReportError(f"{where}: {exc}; rerun `eval tau` into a fresh --out") from None
    return out


@dataclass(frozen=True)
class DomainScore:
    policy: str
    name: str  # "<domain>/<split>"
    tasks: int
    samples: int  # n: samples per task
    episodes: int
    pass_hat: dict[int, float]
    db: float
    outputs: float
    calls: float
    user_turns: float
    stopped: float
    seconds: float


def pass_hat_k(records: Iterable[TauResult], n: int) -> dict[int, float]:
    """τ-bench's pass^k for k = 1..n over tasks with all n samples scored."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for r in records:
        by_task[r.task].append(r.reward)
    complete = [rs for rs in by_task.values() if len(rs) == n]
    if not complete:
        return {}
    return {
        k: sum(comb(sum(1 for x in rs if x == 1.0), k) / comb(n, k) for rs in complete) / len(complete)
        for k in range(1, n + 1)
    }


def group_of(record: TauResult) -> str:
    """`retail/test/3` -> `retail/test`."""
    return record.task.rsplit("/", 1)[0]


def _mean(records: Sequence[TauResult], key: str) -> float:
    return sum(float(getattr(r, key)) for r in records) / max(1, len(records))


def score_domain(policy: str, name: str, records: Sequence[TauResult], n: int | None = None) -> DomainScore:
    """`n`: the samples per task (default: the most any task of `records` has)."""
    per_task: dict[str, int] = defaultdict(int)
    for r in records:
        per_task[r.task] += 1
    n = n or max(per_task.values(), default=1)
    return DomainScore(
        policy=policy,
        name=name,
        tasks=sum(1 for c in per_task.values() if c == n),
        samples=n,
        episodes=len(records),
        pass_hat=pass_hat_k(records, n),
        db=_mean(records, "tau_r_actions"),
        outputs=_mean(records, "tau_r_outputs"),
        calls=_mean(records, "tau_calls"),
        user_turns=_mean(records, "tau_turns_after_prompt"),
        stopped=sum(r.ended_by == "user_stop" for r in records) / max(1, len(records)),
        seconds=_mean(records, "elapsed_s"),
    )


def summarize(records: Iterable[TauResult], n: int | None = None) -> list[DomainScore]:
    """A `DomainScore` per policy and domain/split, sorted by domain, then policy."""
    groups: dict[tuple[str, str], list[TauResult]] = defaultdict(list)
    for r in records:
        groups[(group_of(r), r.policy)].append(r)
    return [score_domain(policy, name, groups[(name, policy)], n) for name, policy in sorted(groups)]


def format_table(scores: Sequence[DomainScore], title: str) -> str:
    ks = sorted({k for s in scores for k in s.pass_hat})
    head = [
        "policy",
        "domain",
        "tasks",
        "n",
        *(f"pass^{k}" for k in ks),
        "db",
        "outputs",
        "calls",
        "user",
        "stop",
        "s/ep",
    ]
    lines = [title, "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for s in scores:
        passes = [f"{s.pass_hat[k]:.3f}" if k in s.pass_hat else "-" for k in ks]
        cells = [s.policy, s.name, str(s.tasks), str(s.samples), *passes]
        cells += [f"{s.db:.3f}", f"{s.outputs:.3f}", f"{s.calls:.2f}", f"{s.user_turns:.2f}", f"{s.stopped:.2f}"]
        lines.append("| " + " | ".join([*cells, f"{s.seconds:.1f}"]) + " |")
    return "\n".join(lines)


def plot(scores: Sequence[DomainScore], title: str, path: Path) -> Path:
    """pass^k per domain (one bar per k), with the database-match share beside it."""
    plt = plotting.pyplot()

    ks = sorted({k for s in scores for k in s.pass_hat})
    width = 0.8 / (len(ks) + 1)
    fig, ax = plt.subplots(figsize=(max(4.0, 2.2 * len(scores)), 3.6))
    xs = range(len(scores))
    for j, k in enumerate(ks):
        ax.bar([x + j * width for x in xs], [s.pass_hat.get(k, 0.0) for s in scores], width, label=f"pass^{k}")
    ax.bar([x + len(ks) * width for x in xs], [s.db for s in scores], width, label="database = gold")
    ax.set_xticks(
        [x + width * len(ks) / 2 for x in xs],
        [f"{s.policy}: {s.name}\n({s.tasks} tasks x {s.samples})" for s in scores],
    )
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    return plotting.save(fig, path)
