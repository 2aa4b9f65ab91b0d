"""`python -m env_registry derive-variants`: variants of the store's answerable environments, of
any family, each validated as `add` validates a record and added when it passes.

A variant's id is its content hash, so one already in the store is counted and not validated
again: a rerun adds nothing, and an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from tqdm.auto import tqdm

from astra_foundation.clikit import UsageError
from env_registry.commands.add import SANDBOX_FAILURES, sandbox_failed
from env_registry.commands.common import CHUNK, Incoming, Rejects, admit, csv, open_store, say
from env_registry.families import variant_hints
from env_registry.family_rules import golden_replay
from env_registry.importers.sources import SourceRow
from env_registry.spec import EnvSpec, Variant
from env_registry.store import EnvStore
from env_registry.validate import family_rules
from env_registry.variant_makers import CannotCarry, make

_DERIVABLE = [v for v in Variant if v is not Variant.ANSWERABLE]


class _Tally:
    """Per variant: made, already in the store (or made from an earlier source too), added,
    failed validation, and the reasons the environments that could not carry it give."""

    def __init__(self) -> None:
        self.made: Counter = Counter()
        self.present: Counter = Counter()
        self.added: Counter = Counter()
        self.failed: Counter = Counter()
        self.cannot: dict[Variant, Counter[CannotCarry]] = {v: Counter() for v in Variant}
        self.skipped: Counter = Counter()  # sources no maker is applied to, by reason
        self.matched = 0  # answerable environments of the asked families read (skipped ones too)

    def print(self, variants: list[Variant]) -> None:
        say(f"{'variant':<18} {'made':>6} {'already':>8} {'added':>6} {'failed':>7} {'cannot':>7}")
        for v in variants:
            cannot = sum(self.cannot[v].values())
            say(
                f"{v.value:<18} {self.made[v]:>6} {self.present[v]:>8} {self.added[v]:>6} {self.failed[v]:>7} "
                f"{cannot:>7}"
            )
        for v in variants:
            for reason, n in sorted(self.cannot[v].items(), key=lambda kv: (-kv[1], kv[0].value)):
                say(f"  {v.value} cannot: {reason.value}: {n}")
        for reason, n in sorted(self.skipped.items(), key=lambda kv: (-kv[1], kv[0])):
            say(f"  not read: {reason}: {n}")


def _skip_reason(env: EnvSpec, args: argparse.Namespace) -> str | None:
    """Why an answerable environment of an asked family is no source of variants (None: it is one)."""
    if family_rules(env).replay_calls is not golden_replay:
        return f"{env.provenance.generator}: validated by its own checker, not by golden calls"
    if env.provenance.scripted and not args.allow_scripted:
        return "made by a dry run (--allow-scripted to derive from it)"
    return None


def _sources(store: EnvStore, args: argparse.Namespace, tally: _Tally) -> Iterator[tuple[int, EnvSpec]]:
    """The answerable environments of the asked families, with their place in the store, at most
    `--limit` of them."""
    families = csv(args.family)
    with tqdm(total=len(store), desc="derive-variants", unit="env", disable=args.quiet) as bar:
        for position, env in enumerate(store):
            bar.update(1)
            if env.variant is not Variant.ANSWERABLE or (families and env.provenance.generator not in families):
                continue
            if args.limit is not None and tally.matched >= args.limit:
                return
            tally.matched += 1
            reason = _skip_reason(env, args)
            if reason:
                tally.skipped[reason] += 1
                continue
            yield position, env


def _admit_chunk(
    args: argparse.Namespace, store: EnvStore, chunk: list[tuple[Variant, Incoming]], rejects: Rejects, tally: _Tally
) -> None:
    """Validate and add one chunk (`admit`: structure, replay twice); each made variant is then
    in the store (added) or not (failed)."""
    admit(args, store, (item for _, item in chunk), rejects)
    for variant, item in chunk:
        if item.spec.id in store:
            tally.added[variant] += 1
        else:
            tally.failed[variant] += 1


def derive(args: argparse.Namespace, store: EnvStore, variants: list[Variant], rejects: Rejects) -> tuple[_Tally, int]:
    """Every asked variant of every source environment: counted, validated and added in chunks.
    Returns the tally and how many source environments were read."""
    tally, read = _Tally(), 0
    chunk: list[tuple[Variant, Incoming]] = []
    seen: set[str] = set()  # two sources can make one variant (ids are content hashes)
    for position, env in _sources(store, args, tally):
        read += 1
        hints = variant_hints(env.provenance.generator)
        for variant in variants:
            made = make(variant, env, hints)
            if isinstance(made, CannotCarry):
                tally.cannot[variant][made] += 1
                continue
            tally.made[variant] += 1
            if made.id in store or made.id in seen:
                tally.present[variant] += 1
                continue
            seen.add(made.id)
            # a variant keeps its source's family (validation treats it the same) and names its source
            source = f"{env.provenance.source}; " if env.provenance.source else ""
            provenance = env.provenance.model_copy(update={"source": f"{source}{variant.value} of {env.id}"})
            made = made.model_copy(update={"provenance": provenance})
            row = SourceRow(str(args.store), {"env": position}, None, made.to_json())
            chunk.append((variant, Incoming(row, made, [])))
        if len(chunk) >= CHUNK:
            _admit_chunk(args, store, chunk, rejects, tally)
            chunk = []
    _admit_chunk(args, store, chunk, rejects, tally)
    return tally, read


def _variants(text: str | None) -> list[Variant]:
    names = csv(text) or [v.value for v in _DERIVABLE]
    known = {v.value: v for v in _DERIVABLE}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"derive-variants --make: {unknown} are not variants to make; choose from {list(known)}")
    return [known[n] for n in names]


def _nothing_to_derive(args: argparse.Namespace, store: EnvStore, tally: _Tally) -> UsageError:
    """The error (exit 2: the command could not run) when no environment matched is a source:
    what matched nothing, and what to do."""
    if tally.skipped:  # answerable environments matched, none a source: each reason says why
        reasons = "; ".join(f"{reason}: {n}" for reason, n in sorted(tally.skipped.items(), key=lambda kv: -kv[1]))
        return UsageError(
            f"derive-variants: none of the {tally.matched} answerable environments read is a source of variants "
            f"({reasons}); variants are made only from environments validated by their golden calls"
        )
    families = sorted({e.provenance.generator for e in store if e.variant is Variant.ANSWERABLE})
    if args.family:
        return UsageError(
            f"derive-variants --family {args.family}: the store holds no answerable environment of "
            f"{csv(args.family)}; its families: {families}"
        )
    return UsageError(
        f"derive-variants: the store {args.store} holds no answerable environment to derive variants from; "
        "add some first (generate, add, import-astra)"
    )


def cmd_derive_variants(args: argparse.Namespace) -> int:
    variants = _variants(args.make)
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"derive-variants --limit {args.limit}: read at least 1 environment")
    open_store(args).close()  # a store that is not there is a usage error, never created empty
    store = open_store(args, "a", allow_scripted=args.allow_scripted)
    rejects = Rejects(args.rejects, Path(args.store).with_name(Path(args.store).name + ".rejects.jsonl"))
    t0 = time.perf_counter()
    try:
        with store:
            tally, read = derive(args, store, variants, rejects)
            if not read:  # nothing could be made: said as an error, not as an empty table
                raise _nothing_to_derive(args, store, tally)
            total = len(store)
    except SANDBOX_FAILURES as exc:
        raise sandbox_failed(exc) from None
    finally:
        rejects.close()
    mode = "structure only" if args.no_replay else "structure + replay twice (determinism)"
    say(
        f"\nread {tally.matched} answerable environments ({tally.matched - read} not derived from) in "
        f"{time.perf_counter() - t0:.1f} s ({mode})"
    )
    tally.print(variants)
    rejects.summary()
    say(f"added {sum(tally.added.values())} variants; store {args.store} now holds {total}")
    return 1 if sum(tally.failed.values()) else 0
