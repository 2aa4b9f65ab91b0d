"""`python -m env_registry generate`: procedural (LLM-free) environments into the store."""

from __future__ import annotations

import argparse
import time
from collections import Counter

from tqdm.auto import tqdm

from astra_foundation.clikit import UsageError
from env_registry.commands.common import CHUNK, csv, open_store, say, table
from env_registry.families.procedural import iter_generate
from env_registry.structure import check_structure
from env_registry.variants import VariantShares


def cmd_generate(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    if args.n < 1:  # a run that would produce nothing: say so before the store is created
        raise UsageError(f"generate --n {args.n}: ask for at least 1 environment")
    choice = (args.seed, args.max_hops, csv(args.domains))
    try:
        shares = VariantShares.parse(args.variants)
    except ValueError as exc:
        raise UsageError(f"generate --variants: {exc}") from None
    try:  # the generator checks its arguments before its first draw: asked for none, it checks only
        next(iter_generate(0, *choice, scenario_types=csv(args.scenario_types)), None)
    except ValueError as exc:  # only the arguments' checks: a ValueError while drawing is a bug
        raise UsageError(f"generate: {exc}") from None
    store = open_store(args, "a")
    stream = iter_generate(args.n, *choice, scenario_types=csv(args.scenario_types), variants=shares)
    added = dupes = broken = 0
    types: Counter = Counter()
    domains: Counter = Counter()
    variants: Counter = Counter()
    with store, tqdm(total=args.n, desc="generate", unit="env", disable=args.quiet) as bar:
        batch = []
        for env in stream:
            issues = check_structure(env)
            if issues:  # a generator bug: report it, never store it
                broken += 1
                for issue in issues[:3]:
                    tqdm.write(f"generator produced an invalid environment: {issue}")
            else:
                batch.append(env)
                types[env.scenario_type.value] += 1
                domains[env.domain] += 1
                variants[env.variant.value] += 1
            bar.update(1)
            if len(batch) >= CHUNK:
                n = store.add_many(batch)
                added, dupes, batch = added + n, dupes + len(batch) - n, []
        n = store.add_many(batch)
        added, dupes = added + n, dupes + len(batch) - n
        total = len(store)
    dt = time.perf_counter() - t0
    say(f"\ngenerated {args.n} procedural environments (seed {args.seed}, max_hops {args.max_hops}) in {dt:.1f} s")
    say(f"  added {added}, already in the store {dupes}, invalid {broken}; store {args.store} now holds {total}")
    table("scenario types", types, args.n)
    table("domains", domains, args.n)
    if set(variants) != {"answerable"}:
        table("variants", variants, args.n)
    return 1 if broken else 0
