"""`python -m env_registry add`: EnvSpec JSONL records into the store, each validated."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

from tqdm.auto import tqdm

from astra_foundation.clikit import UsageError
from astra_foundation.sandbox import SandboxError, SandboxUnavailable
from env_registry.commands.common import Incoming, Rejects, admit, open_store, say
from env_registry.importers.sources import SourceRow
from env_registry.store import StoreError
from env_registry.structure import parse_record

# What the sandbox raises when it cannot run at all (no backend, no worker could start); any
# other RuntimeError is a bug and keeps its traceback.
SANDBOX_FAILURES = (SandboxError, SandboxUnavailable)


def sandbox_failed(exc: Exception, still_needed: str = "") -> UsageError:
    """The one-line error (exit 2) of a command whose replay sandbox failed: what failed and what
    to do (`add`, `import-astra`, `derive-variants` replay golden calls as `add` does)."""
    note = f" ({still_needed})" if still_needed else ""
    return UsageError(
        f"the sandbox that replays golden calls failed: {exc}; where it cannot start on this machine, install "
        f"bubblewrap (e.g. apt-get install bubblewrap) or pass --no-replay to check structure only{note}; "
        "what was added stays, a rerun adds nothing twice"
    )


def _env_lines(args: argparse.Namespace) -> Iterator[Incoming]:
    for file in args.files:
        with open(file, encoding="utf-8") as f:
            for line_no, line in enumerate(tqdm(f, desc=f"add {file}", unit="line", disable=args.quiet), 1):
                text = line.rstrip("\n")
                if text.strip():
                    spec, issues = parse_record(text)
                    yield Incoming(SourceRow(file, {"line": line_no}, None, text), spec, issues)


def cmd_add(args: argparse.Namespace) -> int:
    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    store = open_store(args, "a", allow_scripted=args.allow_scripted)
    rejects = Rejects(args.rejects)
    try:
        with store:
            totals = admit(args, store, _env_lines(args), rejects)
            total = len(store)
    except SANDBOX_FAILURES as exc:
        raise sandbox_failed(exc) from None
    except StoreError as exc:  # a dry run's environments, not allowed
        raise UsageError(f"{exc}; records before this batch were added, rerunning adds nothing twice") from None
    finally:
        rejects.close()
    records = totals["added"] + totals["duplicates"] + rejects.count
    mode = "structure only" if args.no_replay else "structure + replay"
    say(
        f"\n{records} records: {totals['added']} added, {totals['duplicates']} already in the store, "
        f"{rejects.count} rejected ({mode})"
    )
    rejects.summary()
    say(f"store {args.store} now holds {total}")
    return 1 if rejects.count else 0
