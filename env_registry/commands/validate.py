"""`python -m env_registry validate`: structure and golden-call replay of stored environments."""

from __future__ import annotations

import argparse
import json
import time

from astra_foundation.clikit import UsageError, run_async
from env_registry.commands.common import open_store, say, table
from env_registry.validate import validate_stream


def cmd_validate(args: argparse.Namespace) -> int:
    store = open_store(args)
    ids = args.ids or store.ids()
    if args.limit:
        ids = ids[: args.limit]
    missing = [i for i in ids if i not in store]
    if missing:
        raise UsageError(f"not in the store: {missing[:5]}")
    t0 = time.perf_counter()
    try:
        report = run_async(
            validate_stream(
                (store.get(i) for i in ids),
                replay=not args.no_replay,
                concurrency=args.concurrency,
                total=len(ids),
                progress=not args.quiet,
                determinism=not args.no_determinism,
            )
        )
    except RuntimeError as exc:
        raise UsageError(f"{exc}") from None
    dt = time.perf_counter() - t0
    if args.report:
        with open(args.report, "w", encoding="utf-8") as f:
            for issue in report.all_issues():
                f.write(json.dumps(issue.to_dict()) + "\n")
    say(
        f"\nvalidated {report.checked} environments in {dt:.1f} s "
        f"({report.checked / max(dt, 1e-9):.0f} env/s; replayed {report.replayed}"
        f"{', twice (determinism)' if report.determinism else ''})"
    )
    say(f"  passed {report.checked - len(report.failed)}, failed {len(report.failed)}")
    if report.issues:
        table("issues by rule", report.by_rule(), sum(report.by_rule().values()))
        for issue in report.all_issues()[:10]:
            say(f"  {issue}")
        if args.report:
            say(f"all issues: {args.report}")
    return 1 if report.issues else 0
