"""The ASTRA-RL-1k subcommands of `python -m env_registry` and import-astra's recovery step.

    python -m env_registry --store envs export-astra-rl --output-file rows.jsonl
    python -m env_registry recover-calls rl_rows.jsonl --output-file recovered.jsonl
    python -m env_registry --store envs import-astra rl_rows.jsonl [--reward-rule plain]

`recover-calls` runs golden-call recovery (`env_registry.recovery`) on RL-1k rows and writes,
per row, what it recovered, how each call was found, and why the rest was not; it adds nothing
to a store. import-astra runs the same recovery on every sound RL-1k row and imports the rows it
completes as version-2 environments (`env_registry.importers.astra_rl`), after the usual
structure check and replay twice (determinism).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from astra_foundation.clikit import UsageError, run_async
from astra_foundation.llm.config import LLMConfig, build_client
from env_registry.export import DEFAULT_SYSTEM_PROMPT
from env_registry.export_rl import write_rl_rows
from env_registry.importers.astra import Conversion, RlRow, convert
from env_registry.importers.astra_rl import recovered_conversion, recovery_summary, row_tools
from env_registry.importers.sources import SourceError, SourceRow, check_files, read_rows
from env_registry.recovery import Budget, RowRecovery, recover_row
from env_registry.recovery_llm import llm_proposer
from env_registry.structure import Rule
from env_registry.validate import default_sandbox

__all__ = ["RecoveryStep", "budget_of", "cmd_export_astra_rl", "cmd_recover_calls"]

_BATCH = 64  # rows recovered together (one sandbox pool, `--concurrency` rows at once)


def proposer_config(args: argparse.Namespace) -> LLMConfig | None:
    """The proposer's model settings, or None when none is configured (LLM-free recovery)."""
    cfg = LLMConfig.from_args(args)
    return cfg if cfg.base_urls or cfg.scripted or cfg.responder else None


def budget_of(args: argparse.Namespace) -> Budget:
    if args.calls_per_tool < 1 or args.seconds_per_row <= 0:
        raise UsageError("--calls-per-tool must be >= 1 and --seconds-per-row > 0")
    return Budget(calls_per_tool=args.calls_per_tool, seconds_per_row=args.seconds_per_row)


async def recover_rows(
    rows: list[RlRow], budget: Budget, concurrency: int, llm: LLMConfig | None = None
) -> list[RowRecovery]:
    """Recovery of each row, `concurrency` rows at once, in one sandbox pool (with a model as
    the proposer when `llm` is given)."""
    sem = asyncio.Semaphore(max(1, concurrency))
    client = build_client(llm) if llm is not None else None
    propose = llm_proposer(client) if client is not None else None
    try:
        async with default_sandbox() as sandbox:

            async def one(row: RlRow) -> RowRecovery:
                async with sem:
                    return await recover_row(row_tools(row), sandbox, budget, propose)

            return await asyncio.gather(*(one(r) for r in rows))
    finally:
        if client is not None:
            await client.aclose()


def _recoverable(c: Conversion) -> bool:
    """A sound RL-1k row whose only problem is its missing calls."""
    return c.rl_row is not None and all(i.rule is Rule.GOLDEN_PRESENT for i in c.issues)


class RecoveryStep:
    """import-astra's recovery: sound RL-1k rows are held back, recovered in batches and handed on
    as environments (or as rejections naming each unrecovered answer's reason). `counts` says
    how many rows were recovered, imported under the plain rule, or left unrecovered."""

    def __init__(self, args: argparse.Namespace):
        self.enabled = not args.no_recovery
        self.plain = args.reward_rule == "plain"
        self.budget = budget_of(args)
        self.llm = proposer_config(args)
        self.concurrency = args.concurrency
        self.domain = args.domain
        self.pending: list[tuple[SourceRow, Conversion]] = []
        self.counts: Counter = Counter()

    def offer(self, row: SourceRow, c: Conversion) -> bool:
        """True when the step takes the row (to hand it on from `flush`)."""
        if not self.enabled or not _recoverable(c):
            return False
        self.pending.append((row, c))
        return True

    def flush(self, force: bool = False) -> Iterator[tuple[SourceRow, Conversion]]:
        if not self.pending or (len(self.pending) < _BATCH and not force):
            return
        batch, self.pending = self.pending, []
        results = run_async(recover_rows([c.rl_row for _, c in batch], self.budget, self.concurrency, self.llm))
        for (row, c), rec in zip(batch, results, strict=True):
            out = recovered_conversion(c.rl_row, rec, row.label, self.domain, plain=self.plain)
            if out.spec is None:
                self.counts["unrecovered"] += 1
            else:
                self.counts["plain rule" if rec.missing else "recovered"] += 1
            yield row, out

    def summary(self) -> str:
        if not self.counts:
            return ""
        parts = [f"{n} {k}" for k, n in sorted(self.counts.items())]
        note = (
            " (plain-rule rows pay any own-tool call whose output holds the answer; see docs/astra-rl-1k.md)"
            if self.counts["plain rule"]
            else ""
        )
        return f"ASTRA-RL-1k golden-call recovery: {', '.join(parts)}{note}"


# -- export-astra-rl -------------------------------------------------------------------------------


def cmd_export_astra_rl(args: argparse.Namespace, store: Any) -> int:
    domains = {d.strip() for d in (args.domains or "").split(",") if d.strip()}
    envs = (e for e in store if not domains or e.domain in domains)
    if args.limit:
        envs = (e for _, e in zip(range(args.limit), envs, strict=False))
    n = write_rl_rows(envs, args.output_file, None if args.no_system_prompt else DEFAULT_SYSTEM_PROMPT)
    print(
        f"wrote {n} ASTRA-RL-1k rows (golden calls, sub-question texts and final answers stripped) to {args.output_file}"
    )
    return 0


# -- recover-calls ---------------------------------------------------------------------------------


def _rl_rows(files: list[str]) -> Iterator[tuple[SourceRow, Conversion]]:
    for file in files:
        for row in read_rows(file):
            if row.data is None:
                yield row, Conversion("unreadable", None, [])
                continue
            yield row, convert(row.data, row.label)


def cmd_recover_calls(args: argparse.Namespace) -> int:
    try:
        check_files(args.files)
        rows = list(_rl_rows(args.files))
    except SourceError as exc:
        raise UsageError(str(exc)) from None
    sound = [(row, c) for row, c in rows if _recoverable(c)]
    results = run_async(
        recover_rows([c.rl_row for _, c in sound], budget_of(args), args.concurrency, proposer_config(args))
    )
    answers = recovered = complete = 0
    with open(args.output_file, "w", encoding="utf-8") as f:
        for (row, c), rec in zip(sound, results, strict=True):
            total = sum(len(a) for a in c.rl_row.targets.values())
            answers, recovered, complete = answers + total, recovered + len(rec.recovered), complete + rec.complete
            f.write(json.dumps({"row": row.label, **recovery_summary(rec)}, ensure_ascii=False) + "\n")
            if not args.quiet:
                print(f"{row.label}: {len(rec.recovered)}/{total} answers recovered in {rec.seconds:.2f} s")
                for a, why in rec.missing.items():
                    print(f"  {a}: {why}")
    skipped = len(rows) - len(sound)
    print(
        f"\n{len(sound)} sound ASTRA-RL-1k rows ({skipped} other records or defective rows skipped: import-astra "
        f"lists their reasons): {complete} fully recovered, {recovered}/{answers} answers; details in {args.output_file}"
    )
    return 0 if complete == len(sound) else 1
