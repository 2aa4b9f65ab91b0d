"""`python -m env_registry import-astra`: ASTRA's released environments into the store (ASTRA-RL-1k
rows' golden calls recovered in the sandbox first)."""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from tqdm.auto import tqdm

from env_registry import cli_rl
from env_registry.commands.add import SANDBOX_FAILURES, sandbox_failed
from env_registry.commands.common import Incoming, Rejects, admit, open_store, say, table
from env_registry.importers.astra import convert
from env_registry.importers.sources import check_files, read_rows
from env_registry.structure import Rule, ValidationIssue


def _astra_records(args: argparse.Namespace, formats: Counter, recovery: cli_rl.RecoveryStep) -> Iterator[Incoming]:
    for file in args.files:
        for row in tqdm(read_rows(file), desc=f"import {file}", unit="record", disable=args.quiet):
            if row.data is None:
                formats["unreadable"] += 1
                yield Incoming(row, None, [ValidationIssue("", "", Rule.IMPORT_FORMAT, row.error or "")])
                continue
            converted = convert(row.data, row.label, args.domain)
            formats[converted.format] += 1
            if not recovery.offer(row, converted):
                yield Incoming(row, converted.spec, converted.issues)
            for held, out in recovery.flush():
                yield Incoming(held, out.spec, out.issues)
    for held, out in recovery.flush(force=True):
        yield Incoming(held, out.spec, out.issues)


def cmd_import_astra(args: argparse.Namespace) -> int:
    check_files(args.files)  # a SourceError (a UserError) names the unreadable file
    store = open_store(args, "a")
    # Beside the store, the command's output: a release's folder may be read-only or shared.
    rejects = Rejects(args.rejects, Path(args.store).with_name(Path(args.store).name + ".rejects.jsonl"))
    formats: Counter = Counter()
    recovery = cli_rl.RecoveryStep(args)
    t0 = time.perf_counter()
    try:
        with store:
            totals = admit(args, store, _astra_records(args, formats, recovery), rejects)
            total = len(store)
    except SANDBOX_FAILURES as exc:
        raise sandbox_failed(
            exc, "ASTRA-RL-1k rows need it either way: their golden calls are recovered by running the tools"
        ) from None
    finally:
        rejects.close()
    records = sum(formats.values())
    mode = "structure only" if args.no_replay else "structure + replay twice (determinism)"
    say(f"\nread {records} ASTRA records in {time.perf_counter() - t0:.1f} s ({mode})")
    table("formats", formats, records)
    if recovery.summary():
        say(recovery.summary())
    say(
        f"imported {totals['added']} environments, {totals['duplicates']} already in the store, "
        f"rejected {rejects.count}"
    )
    rejects.summary()
    say(f"store {args.store} now holds {total}")
    return 1 if rejects.count else 0
