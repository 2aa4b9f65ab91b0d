"""Running BFCL multi-turn evaluations: rows, a resumable results file, the accuracy table.

Results file (`<out>/results.jsonl`): one `BfclResult` per line (`astra_verl.eval.results`: typed,
versioned, one run per file, resumable):

    version        RESULTS_VERSION
    id, category   the BFCL entry
    model          the evaluated model (`--model`; a replay's "ground-truth"): one per file
    status         "scored" (a verdict exists) | "error" (the episode could not run: endpoint down,
                   context overflow ...; the next run retries it)
    valid          BFCL's verdict (false for errors)
    verdict        BfclVerdict fields (error_type, error_message, details, turns, steps, calls)
    error          for status "error": what went wrong
    episode        the EpisodeLog (calls, outputs, hook state): enough to re-score offline
    messages       the conversation (when kept)
    usage, elapsed_s

Resuming: entries whose last record is "scored" are skipped; the others run again and their
new record is appended (the last record of an id wins). A line torn by a crash is cut off
when the file is next opened for appending. Nothing is lost or counted twice. Another model's
file is refused before the first entry.

Accuracy: per category, valid / entries of the category (errors count as failures, as BFCL
counts an inference error); Overall is the unweighted mean of the categories present, as in
BFCL's and ASTRA's multi-turn tables.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from tqdm.auto import tqdm

from astra_verl.benchmarks.bfcl_score import BfclVerdict, score_episode
from astra_verl.calls.call_log import EpisodeLog
from astra_verl.eval.results import (
    ResultRecord,
    ResultsFile,
    ResultsFileError,  # noqa: F401  - re-exported: BFCL callers catch it here
)
from env_registry.families import bfcl
from env_registry.families.bfcl import CATEGORIES, CATEGORY_LABELS, BfclEntry, BfclTarget
from env_registry.store import EnvStore

RESULTS_VERSION = 1


# -- rows -------------------------------------------------------------------------------------


@dataclass
class BfclSet:
    """Entries with their rows and ground truth, in BFCL's order."""

    entries: list[BfclEntry]
    rows: list[dict[str, Any]]
    targets: list[BfclTarget]

    def select(self, ids: set[str]) -> BfclSet:
        keep = [i for i, e in enumerate(self.entries) if e.id in ids]
        return BfclSet([self.entries[i] for i in keep], [self.rows[i] for i in keep], [self.targets[i] for i in keep])


def prepare(
    store_dir: str | Path,
    categories: Sequence[str] = CATEGORIES,
    *,
    ids: Iterable[str] | None = None,
    limit: int | None = None,
    progress: bool = False,
) -> BfclSet:
    """Load the entries, add their environments to the store at `store_dir`, build their rows."""
    entries = bfcl.load_entries(categories, ids, limit)
    version = bfcl.bfcl_version()
    specs = [bfcl.entry_spec(e, version) for e in entries]
    with EnvStore.open(store_dir, "a") as store:
        store.add_many(specs)
    store = EnvStore.open(store_dir)
    rows = bfcl.export_rows(store, entries, specs, progress=progress).rows
    targets = [BfclTarget.model_validate_json(r["reward_model"]["ground_truth"]) for r in rows]
    return BfclSet(entries, rows, targets)


# -- results file ---------------------------------------------------------------------------


class BfclResult(ResultRecord):
    """One line of a BFCL multi-turn results file (see the module docstring)."""

    section = "eval bfcl results record"
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ("model",)

    version: Literal[1] = RESULTS_VERSION
    id: str
    category: str
    model: str
    status: Literal["scored", "error"]
    valid: bool
    verdict: dict[str, Any] | None = None  # status "scored"
    episode: dict[str, Any] | None = None  # status "scored": the EpisodeLog, to re-score offline
    messages: list[Any] | None = None  # status "scored", unless --no-messages
    usage: dict[str, Any] | None = None
    elapsed_s: float | None = None
    error: str | None = None  # status "error"


def results_file(path: str | Path, model: str | None = None, *, option: str = "--out") -> ResultsFile[BfclResult]:
    """The BFCL multi-turn results file at `path`; `model`: the run that appends (a file of another
    model's is refused here), None to read it."""
    return ResultsFile(path, BfclResult, run=None if model is None else {"model": model}, option=option)


def scored_record(
    entry: BfclEntry, verdict: BfclVerdict, log: EpisodeLog, *, model: str, messages=None, usage=None, elapsed_s=0.0
) -> BfclResult:
    return BfclResult(
        id=entry.id,
        category=entry.category,
        model=model,
        status="scored",
        valid=verdict.valid,
        verdict=verdict.to_dict(),
        episode=log.to_dict(),
        messages=messages,
        usage=usage or {},
        elapsed_s=round(elapsed_s, 3),
    )


def error_record(entry: BfclEntry, error: BaseException, *, model: str) -> BfclResult:
    return BfclResult(
        id=entry.id,
        category=entry.category,
        model=model,
        status="error",
        valid=False,
        error=f"{type(error).__name__}: {error}",
    )


# -- running --------------------------------------------------------------------------------


async def evaluate(
    data: BfclSet,
    run_episode: Callable[[int], Awaitable[Any]],
    sandbox: Any,
    results: ResultsFile[BfclResult],
    *,
    model: str,
    concurrency: int = 16,
    progress: bool = True,
    keep_messages: bool = True,
    errors: tuple[type[BaseException], ...] = (),
) -> dict[str, int]:
    """Run and score every entry not yet scored in `results`; `run_episode(i)` returns
    (EpisodeLog, messages, usage) for entry i. Exceptions in `errors` become error records;
    anything else propagates (a bug, or the sandbox itself failing).

    Over 60 lines because the cancellation rules (first failure, Ctrl-C) must see the same task
    list and progress bar as the episode closure; the comments below say why each step is there."""
    todo = [i for i, e in enumerate(data.entries) if not results.done(e.id)]
    counts = {"run": 0, "valid": 0, "errors": 0, "skipped": len(data.entries) - len(todo)}
    gate = asyncio.Semaphore(max(1, concurrency))
    bar = tqdm(total=len(todo), desc="bfcl", unit="entry", disable=not progress)

    async def one(i: int) -> None:
        entry = data.entries[i]
        async with gate:
            t0 = time.perf_counter()
            try:
                log, messages, usage = await run_episode(i)
            except errors as exc:
                results.append(error_record(entry, exc, model=model))
                counts["errors"] += 1
            else:
                verdict = await score_episode(sandbox, data.targets[i], log)
                results.append(
                    scored_record(
                        entry,
                        verdict,
                        log,
                        model=model,
                        messages=messages if keep_messages else None,
                        usage=usage,
                        elapsed_s=time.perf_counter() - t0,
                    )
                )
                counts["valid"] += verdict.valid
            counts["run"] += 1
            bar.update(1)
            bar.set_postfix(
                acc=f"{counts['valid'] / max(1, counts['run'] - counts['errors']):.3f}", err=counts["errors"]
            )

    tasks = [asyncio.ensure_future(one(i)) for i in todo]
    try:
        # On the first failure, cancel the rest before the caller tears the sandbox down: an
        # episode still running would otherwise record the teardown as its verdict.
        done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION) if tasks else (set(), set())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        for task in done:
            task.result()
    finally:
        # Interrupted (Ctrl-C cancels this coroutine): stop every episode before the sandbox and
        # the client go, and read each one's outcome, so none is reported "never retrieved".
        unfinished = [t for t in tasks if not t.done()]
        for task in unfinished:
            task.cancel()
        await asyncio.gather(*unfinished, return_exceptions=True)
        for task in tasks:
            if not task.cancelled():
                task.exception()
        bar.close()
    return counts


# -- the table ------------------------------------------------------------------------------


@dataclass
class CategoryScore:
    category: str
    entries: int
    valid: int
    errors: int
    causes: Counter

    @property
    def accuracy(self) -> float:
        return self.valid / self.entries if self.entries else 0.0


def summarize(records: Iterable[BfclResult], categories: Sequence[str] = CATEGORIES) -> list[CategoryScore]:
    by_cat: dict[str, list[BfclResult]] = defaultdict(list)
    for r in records:
        by_cat[r.category].append(r)
    out = []
    for c in categories:
        rs = by_cat.get(c, [])
        if not rs:
            continue
        causes: Counter = Counter()
        for r in rs:
            if r.status == "error":
                causes["error: " + (r.error or "").split(":", 1)[0]] += 1
            elif not r.valid:
                causes[(r.verdict or {}).get("error_type") or "unknown"] += 1
        out.append(
            CategoryScore(
                category=c,
                entries=len(rs),
                valid=sum(1 for r in rs if r.status == "scored" and r.valid),
                errors=sum(1 for r in rs if r.status == "error"),
                causes=causes,
            )
        )
    return out


def overall(scores: Sequence[CategoryScore]) -> float:
    return sum(s.accuracy for s in scores) / len(scores) if scores else 0.0


def format_table(scores: Sequence[CategoryScore], model: str) -> str:
    """The paper's multi-turn table (Base, Miss Func, Miss Param, Long Context, Overall), in %."""
    heads = [CATEGORY_LABELS[s.category] for s in scores] + ["Overall"]
    cells = [f"{100 * s.accuracy:.2f}" for s in scores] + [f"{100 * overall(scores):.2f}"]
    counts = [f"{s.valid}/{s.entries}" + (f" ({s.errors} err)" if s.errors else "") for s in scores] + [""]
    width = [max(len(h), len(c), len(n)) for h, c, n in zip(heads, cells, counts, strict=True)]
    name_w = max(len("Model"), len(model))

    def line(first: str, items: list[str]) -> str:
        return (
            "| "
            + first.ljust(name_w)
            + " | "
            + " | ".join(x.rjust(w) for x, w in zip(items, width, strict=True))
            + " |"
        )

    rule = "|" + "-" * (name_w + 2) + "|" + "|".join("-" * (w + 2) for w in width) + "|"
    return "\n".join([line("Model", heads), rule, line(model, cells), line("", counts)])


def format_causes(scores: Sequence[CategoryScore]) -> str:
    lines = []
    for s in scores:
        if s.causes:
            parts = ", ".join(f"{k} {v}" for k, v in s.causes.most_common())
            lines.append(f"{CATEGORY_LABELS[s.category]}: {parts}")
    return "\n".join(lines) if lines else "no failures"
