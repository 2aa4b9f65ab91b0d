"""`python -m env_registry`: build, check, inspect and export a store of ASTRA environments.

    python -m env_registry --store envs generate --n 2000 --seed 0
    python -m env_registry --store envs add synthesized.jsonl
    python -m env_registry --store envs import-astra step5_merged.json
    python -m env_registry --store envs export-astra-rl --out rl_rows.jsonl
    python -m env_registry recover-calls rl_rows.jsonl --out recovered.jsonl
    python -m env_registry --store envs validate
    python -m env_registry --store envs stats --plot stats.png
    python -m env_registry --store envs show 3f2a9c...
    python -m env_registry --store envs export-parquet --out data --mixing banded --tokenizer /models/qwen
    python -m env_registry schema

The store defaults to $ASTRA_ENV_STORE, else ./env_store. Exit status (as every astra-verl
command line, `env_registry.clikit`): 0 when everything passed, 1 when some record or environment
was rejected or failed validation, 2 when the command could not run (usage, unreadable input,
unwritable output), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from env_registry import cli_rl_flags
from env_registry.clikit import UsageError, add_quiet, run_async, run_cli

# The commands' modules (sympy, pyarrow, networkx, jsonschema: over a second) are bound by `_load`
# when a command runs, so `--help` answers at once. The flags' help needs a few of their names:
# copies here, checked equal to the originals by tests/test_cli_help.py.
DOMAINS = ("geography", "finance", "people", "retail", "climate", "events")  # families.procedural.DOMAINS
SCENARIO_TYPES = ("single_hop", "multi_hop", "parallel_single_hop", "parallel_multi_hop")  # spec.ScenarioType
RECOVERY_KINDS = ("wrong_argument", "unknown_tool", "malformed")  # golden_sft.RECOVERY_KINDS
DEFAULT_DOMAIN = "astra"  # importers.astra.DEFAULT_DOMAIN
DEFAULT_INTERACTION = "astra_default"  # export.DEFAULT_INTERACTION


def _load() -> None:
    """Bind the commands' modules in this module (see above). Idempotent."""
    global DEFAULT_SYSTEM_PROMPT, nx, tqdm, SettingsError, ExportConfig, ExportError, export_rows, write_export, iter_generate, GoldenSFTError, Recovery, write_golden_sft, convert, SourceError, SourceRow, check_files, read_rows, build_mixer, STRUCTURE_SAMPLE, shape_of, structure_of, tool_api, spec_json_schema, EnvStore, StoreError, Rule, ValidationIssue, check_structure, family_rules, parse_record, validate_stream, cli_rl, AnswerCounts  # noqa: PLW0603
    import networkx as nx
    from tqdm.auto import tqdm

    from astra_verl.strict import SettingsError
    from env_registry import cli_rl
    from env_registry.answer_stats import AnswerCounts
    from env_registry.export import (
        DEFAULT_SYSTEM_PROMPT,
        ExportConfig,
        ExportError,
        export_rows,
        write_export,
    )
    from env_registry.families.procedural import iter_generate
    from env_registry.golden_sft import GoldenSFTError, Recovery, write_golden_sft
    from env_registry.importers.astra import convert
    from env_registry.importers.sources import SourceError, SourceRow, check_files, read_rows
    from env_registry.mixing import build_mixer
    from env_registry.shape import STRUCTURE_SAMPLE, shape_of, structure_of, tool_api
    from env_registry.spec import spec_json_schema
    from env_registry.store import EnvStore, StoreError
    from env_registry.validate import (
        Rule,
        ValidationIssue,
        check_structure,
        family_rules,
        parse_record,
        validate_stream,
    )


DEFAULT_STORE = os.environ.get("ASTRA_ENV_STORE", "env_store")
_CHUNK = 1000


def _out(line: str = "") -> None:
    print(line, flush=True)


def _table(title: str, counts: Counter, total: int) -> None:
    _out(f"{title}:")
    for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        _out(f"  {str(key):<24} {n:>8}  {100 * n / max(total, 1):5.1f}%")


def _store(args: argparse.Namespace, mode: str = "r", *, allow_scripted: bool = False):
    if Path(args.store).exists() and not Path(args.store).is_dir():
        raise UsageError(f"--store {args.store} is a file, not a store directory; pass a directory")
    try:
        return EnvStore.open(args.store, mode, allow_scripted=allow_scripted)
    except FileNotFoundError as exc:
        raise UsageError(f"{exc}") from None


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


# -- generate ------------------------------------------------------------------------------


def cmd_generate(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    if args.n < 1:  # a run that would produce nothing: say so before the store is created
        raise UsageError(f"generate --n {args.n}: ask for at least 1 environment")
    try:
        stream = iter_generate(
            args.n, args.seed, args.max_hops, _csv(args.domains), scenario_types=_csv(args.scenario_types)
        )
        first = next(stream, None)  # the generator checks its arguments on the first draw: before the store exists
    except ValueError as exc:
        raise UsageError(f"{exc}") from None
    store = _store(args, "a")
    stream = itertools.chain([first] if first is not None else [], stream)
    added = dupes = broken = 0
    types: Counter = Counter()
    domains: Counter = Counter()
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
            bar.update(1)
            if len(batch) >= _CHUNK:
                n = store.add_many(batch)
                added, dupes, batch = added + n, dupes + len(batch) - n, []
        n = store.add_many(batch)
        added, dupes = added + n, dupes + len(batch) - n
        total = len(store)
    dt = time.perf_counter() - t0
    _out(f"\ngenerated {args.n} procedural environments (seed {args.seed}, max_hops {args.max_hops}) in {dt:.1f} s")
    _out(f"  added {added}, already in the store {dupes}, invalid {broken}; store {args.store} now holds {total}")
    _table("scenario types", types, args.n)
    _table("domains", domains, args.n)
    return 1 if broken else 0


# -- add -----------------------------------------------------------------------------------


class _Rejects:
    """Rejected records, appended with file, place and reasons; opened on the first rejection.
    `rules` counts rejected records per rule they broke (a record with several counts in each).
    Written to `explicit`, else `default`, else next to the input file of the first rejection."""

    def __init__(self, explicit: str | None, default: Path | None = None):
        self.explicit = Path(explicit) if explicit else default
        self.path: Path | None = None
        self.count = 0
        self.rules: Counter = Counter()
        self._f = None

    def write(self, row: SourceRow, issues: list) -> None:
        self.count += 1
        self.rules.update({i.rule.value for i in issues})
        if self.count <= 10:
            first = issues[0]
            where = f" {first.field}:" if first.field else ""  # a whole-record issue has no field
            _out(f"rejected {row.label}: [{first.rule.value}]{where} {first.message}")
        if self._f is None:
            self.path = self.explicit or Path(row.file).with_suffix(".rejects.jsonl")
            self._f = open(self.path, "a", encoding="utf-8")
        record = {"file": row.file, **row.where, "issues": [i.to_dict() for i in issues], "record": row.text}
        self._f.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._f.flush()

    def close(self) -> None:
        if self._f is not None:
            self._f.close()

    def summary(self) -> None:
        if self.count:
            _out(f"rejected records with their reasons: {self.path}")
            _table("rejected records by rule", self.rules, self.count)


@dataclass
class _Incoming:
    """A record on its way into the store: where it came from, its spec (None when it could not
    be read into one) and the problems found so far."""

    row: SourceRow
    spec: Any
    issues: list


def _admit(args: argparse.Namespace, store, incoming: Iterable[_Incoming], rejects: _Rejects) -> Counter:
    """Structure check, replay in the sandbox (chunks of `_CHUNK`, unless --no-replay), then add;
    every rejected record goes to `rejects`. Counts of added and duplicate records."""
    totals: Counter = Counter()

    def flush(pending: list[_Incoming]) -> None:
        if not pending:
            return
        failing: dict[str, list] = {}
        if not args.no_replay:
            specs = [item.spec for item in pending]
            failing = run_async(validate_stream(specs, concurrency=args.concurrency, progress=False)).issues
        good = []
        for item in pending:
            if item.spec.id in failing:
                rejects.write(item.row, failing[item.spec.id])
            else:
                good.append(item.spec)
        n = store.add_many(good)
        totals["added"] += n
        totals["duplicates"] += len(good) - n

    pending: list[_Incoming] = []
    for item in incoming:
        issues = item.issues + (_structure(item.spec) if item.spec is not None else [])
        if issues:
            rejects.write(item.row, issues)
        else:
            pending.append(item)
        if len(pending) >= _CHUNK:
            flush(pending)
            pending = []
    flush(pending)
    return totals


def _structure(spec: Any) -> list[ValidationIssue]:
    """Structural issues less those the environment's family waives (as `validate` reads them)."""
    waives = family_rules(spec).waives
    return [i for i in check_structure(spec) if not waives(i.rule.value, i.field)]


def _env_lines(args: argparse.Namespace) -> Iterator[_Incoming]:
    for file in args.files:
        with open(file, encoding="utf-8") as f:
            for line_no, line in enumerate(tqdm(f, desc=f"add {file}", unit="line", disable=args.quiet), 1):
                text = line.rstrip("\n")
                if text.strip():
                    spec, issues = parse_record(text)
                    yield _Incoming(SourceRow(file, {"line": line_no}, None, text), spec, issues)


def cmd_add(args: argparse.Namespace) -> int:
    missing = [f for f in args.files if not Path(f).is_file()]
    if missing:
        raise UsageError(f"no such file: {', '.join(missing)}")
    store = _store(args, "a", allow_scripted=args.allow_scripted)
    rejects = _Rejects(args.rejects)
    try:
        with store:
            totals = _admit(args, store, _env_lines(args), rejects)
            total = len(store)
    except RuntimeError as exc:  # replay without a sandbox
        raise UsageError(f"{exc}") from None
    except StoreError as exc:  # a dry run's environments, not allowed
        raise UsageError(f"{exc}; records before this batch were added, rerunning adds nothing twice") from None
    finally:
        rejects.close()
    records = totals["added"] + totals["duplicates"] + rejects.count
    mode = "structure only" if args.no_replay else "structure + replay"
    _out(
        f"\n{records} records: {totals['added']} added, {totals['duplicates']} already in the store, "
        f"{rejects.count} rejected ({mode})"
    )
    rejects.summary()
    _out(f"store {args.store} now holds {total}")
    return 1 if rejects.count else 0


# -- import-astra --------------------------------------------------------------------------


def _astra_records(args: argparse.Namespace, formats: Counter, recovery: cli_rl.RecoveryStep) -> Iterator[_Incoming]:
    for file in args.files:
        for row in tqdm(read_rows(file), desc=f"import {file}", unit="record", disable=args.quiet):
            if row.data is None:
                formats["unreadable"] += 1
                yield _Incoming(row, None, [ValidationIssue("", "", Rule.IMPORT_FORMAT, row.error or "")])
                continue
            converted = convert(row.data, row.label, args.domain)
            formats[converted.format] += 1
            if not recovery.offer(row, converted):
                yield _Incoming(row, converted.spec, converted.issues)
            for held, out in recovery.flush():
                yield _Incoming(held, out.spec, out.issues)
    for held, out in recovery.flush(force=True):
        yield _Incoming(held, out.spec, out.issues)


def cmd_import_astra(args: argparse.Namespace) -> int:
    try:
        check_files(args.files)
    except SourceError as exc:
        raise UsageError(str(exc)) from None
    store = _store(args, "a")
    # Beside the store, the command's output: a release's folder may be read-only or shared.
    rejects = _Rejects(args.rejects, Path(args.store).with_name(Path(args.store).name + ".rejects.jsonl"))
    formats: Counter = Counter()
    recovery = cli_rl.RecoveryStep(args)
    t0 = time.perf_counter()
    try:
        with store:
            totals = _admit(args, store, _astra_records(args, formats, recovery), rejects)
            total = len(store)
    except (RuntimeError, SourceError) as exc:
        raise UsageError(f"{exc}") from None
    finally:
        rejects.close()
    records = sum(formats.values())
    mode = "structure only" if args.no_replay else "structure + replay twice (determinism)"
    _out(f"\nread {records} ASTRA records in {time.perf_counter() - t0:.1f} s ({mode})")
    _table("formats", formats, records)
    if recovery.summary():
        _out(recovery.summary())
    _out(
        f"imported {totals['added']} environments, {totals['duplicates']} already in the store, "
        f"rejected {rejects.count}"
    )
    rejects.summary()
    _out(f"store {args.store} now holds {total}")
    return 1 if rejects.count else 0


def cmd_export_astra_rl(args: argparse.Namespace) -> int:
    return cli_rl.cmd_export_astra_rl(args, _store(args))


# -- validate ------------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace) -> int:
    store = _store(args)
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
    _out(
        f"\nvalidated {report.checked} environments in {dt:.1f} s "
        f"({report.checked / max(dt, 1e-9):.0f} env/s; replayed {report.replayed}"
        f"{', twice (determinism)' if report.determinism else ''})"
    )
    _out(f"  passed {report.checked - len(report.failed)}, failed {len(report.failed)}")
    if report.issues:
        _table("issues by rule", report.by_rule(), sum(report.by_rule().values()))
        for issue in report.all_issues()[:10]:
            _out(f"  {issue}")
        if args.report:
            _out(f"all issues: {args.report}")
    return 1 if report.issues else 0


# -- stats ---------------------------------------------------------------------------------


def cmd_stats(args: argparse.Namespace) -> int:
    store = _store(args)
    domains: Counter = Counter()
    types: Counter = Counter()
    hops: Counter = Counter()
    subs: Counter = Counter()
    tools: Counter = Counter()
    calls = 0
    needs_tool = 0
    n_subs = 0
    names: set[str] = set()
    apis: set[str] = set()
    structures: set[str] = set()  # of the first STRUCTURE_SAMPLE environments, so stores compare
    answers = AnswerCounts()
    for i, env in enumerate(tqdm(store, total=len(store), desc="stats", unit="env", disable=args.quiet)):
        if i < STRUCTURE_SAMPLE:
            structures.add(structure_of(env))
        apis.update(tool_api(t) for t in env.tools)
        domains[env.domain] += 1
        types[env.scenario_type.value] += 1
        try:
            hops[shape_of(env).hops] += 1
        except nx.NetworkXUnfeasible:  # its trace has a cycle (validation rejects those; a store may hold them)
            hops["cyclic"] += 1
        subs[len(env.sub_questions)] += 1
        tools[len(env.tools)] += 1
        calls += sum(len(t.golden_calls) for t in env.tools)
        needs_tool += sum(q.needs_tool for q in env.sub_questions)
        n_subs += len(env.sub_questions)
        names.update(t.name for t in env.tools)
        answers.add(env)
    n = len(store)
    summary = {
        "environments": n,
        "sub_questions_mean": n_subs / max(n, 1),
        "needs_tool_share": needs_tool / max(n_subs, 1),
        "golden_calls_mean": calls / max(n, 1),
        "distinct_tool_names": len(names),
        "distinct_tool_apis": len(apis),
        "one_tool_share": tools[1] / max(n, 1),
        "distinct_structures": len(structures),
        "structure_sample": min(n, STRUCTURE_SAMPLE),
        "domains": dict(domains),
        "scenario_types": dict(types),
        "hops": {str(k): v for k, v in hops.items()},
        "sub_questions": {str(k): v for k, v in subs.items()},
        "tools_per_env": {str(k): v for k, v in tools.items()},
        **answers.summary(),
    }
    if args.json:
        _out(json.dumps(summary, indent=2))
    else:
        counts = {"domains": domains, "scenario types": types, "hops (longest tool chain)": hops}
        tables = {**counts, "sub-questions per env": subs, "tools per env": tools}
        _print_stats(args.store, summary, {**tables, "comparison winner's listed position": answers.winners})
    if args.plot:
        _plot(args.plot, {"domain": domains, "scenario type": types, "hops": hops, "tools per env": tools}, n)
        _out(f"plot: {args.plot}")
    return 0


def _print_stats(store: str, s: dict[str, Any], tables: dict[str, Counter]) -> None:
    n = s["environments"]
    _out(f"{n} environments in {store}")
    _out(
        f"  {s['sub_questions_mean']:.2f} sub-questions per env ({100 * s['needs_tool_share']:.1f}% need a tool), "
        f"{s['golden_calls_mean']:.2f} golden calls per env, {s['distinct_tool_names']} distinct tool names"
    )
    _out(
        f"  {s['distinct_structures']} distinct structures in the first {s['structure_sample']} environments, "
        f"{s['distinct_tool_apis']} distinct tool APIs, {100 * s['one_tool_share']:.1f}% of environments with one tool"
    )
    _out(
        f"  {s['echo_answer_sub_questions']} sub-questions whose answer echoes a golden-call argument "
        "(rewarded only for the golden call itself)"
    )
    for title, counts in tables.items():
        _table(title, counts, n)


def _plot(path: str, panels: dict[str, Counter], n: int) -> None:
    # Lazy: matplotlib is heavy to import and only `stats --plot` draws.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for ax, (title, counts) in zip(axes.flat, panels.items(), strict=True):
        keys = sorted(counts, key=lambda k: (isinstance(k, str), k))
        ax.bar([str(k) for k in keys], [counts[k] for k in keys], color="#4C72B0")
        ax.set_title(title)
        ax.tick_params(axis="x", rotation=30)
    fig.suptitle(f"{n} environments")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- show / schema -------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace) -> int:
    store = _store(args)
    env_id = args.id
    if env_id not in store:
        matches = [i for i in store.ids() if i.startswith(env_id)] if len(env_id) >= 6 else []
        if len(matches) != 1:
            why = "is ambiguous" if matches else "matches no environment"
            raise UsageError(f"{env_id!r} {why} in {args.store} (give the full id or a unique prefix of >= 6)")
        env_id = matches[0]
    _out(json.dumps(store.get(env_id).model_dump(mode="json"), indent=2, ensure_ascii=False))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    _out(json.dumps(spec_json_schema(), indent=2))
    return 0


# -- export --------------------------------------------------------------------------------


def _mixer(args: argparse.Namespace, store):
    if args.mixing == "none":
        return None
    opts: dict[str, Any] = {}
    if args.mixing == "banded":
        opts["k"] = args.k
        if args.embedding_model:
            opts["embedding_model"] = args.embedding_model
    if args.mixing == "random":
        opts.update(random_min=args.random_min, random_max=args.random_max)
    return build_mixer(store, args.mixing, seed=args.seed, **opts)


def cmd_export(args: argparse.Namespace) -> int:
    if args.max_prompt_length is not None and not args.tokenizer:
        raise UsageError("--max-prompt-length needs --tokenizer (prompts are measured with its chat template)")
    store = _store(args)
    domains = set(_csv(args.domains) or [])
    envs = store.filter(lambda e: e.domain in domains) if domains else store
    tokenizer = None
    if args.tokenizer and not Path(args.tokenizer).is_dir():  # else transformers tries the hub for a repo of that name
        raise UsageError(f"--tokenizer {args.tokenizer}: not a directory; pass a local model or tokenizer folder")
    if args.tokenizer:
        from transformers import AutoTokenizer  # lazy: heavy to import, only --tokenizer needs it

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    config = ExportConfig(
        mixing_mode=args.mixing,
        seed=args.seed,
        val_fraction=args.val_fraction,
        system_prompt=None if args.no_system_prompt else _or_default(args.system_prompt, DEFAULT_SYSTEM_PROMPT),
        interaction_kwargs={"name": args.interaction},
        max_prompt_length=args.max_prompt_length,
        rows=args.rows,
    )
    t0 = time.perf_counter()
    try:
        result = export_rows(
            store, envs, config=config, mixer=_mixer(args, store), tokenizer=tokenizer, progress=not args.quiet
        )
    except ExportError as exc:
        raise UsageError(f"{exc}") from None
    folder = write_export(
        result, args.out, config, {"store": str(Path(args.store).resolve()), "tokenizer": args.tokenizer}
    )
    dt = time.perf_counter() - t0
    n_rows = len(result.train) + len(result.val)
    _out(f"\nexported {n_rows} rows in {dt:.1f} s to {folder}")
    _out(f"  train {len(result.train)}, val {len(result.val)} (val fraction {args.val_fraction}, grouped by question)")
    _out(f"  mixing {json.dumps(result.mixing)}; {result.distractors / max(n_rows, 1):.2f} distractors per row")
    if tokenizer is not None:
        lengths = [json.loads(r["extra_info"]["astra"])["prompt_tokens"] for r in result.train + result.val]
        if lengths:
            lengths.sort()
            _out(f"  prompt tokens: median {lengths[len(lengths) // 2]}, max {lengths[-1]}")
    if result.dropped:
        _out(
            f"  dropped {len(result.dropped)} rows over {args.max_prompt_length} prompt tokens (list: {folder / 'dropped.jsonl'}):"
        )
        for d in result.dropped[:5]:
            _out(f"    {d.env_id} ({d.split}): {d.prompt_tokens} tokens")
    return 0


def cmd_export_sft(args: argparse.Namespace) -> int:
    try:
        recovery = Recovery(share=args.recovery_share, kinds=tuple(_csv(args.recovery_kinds) or ()), seed=args.seed)
    except SettingsError as exc:
        raise UsageError(f"{exc} (--recovery-share, --recovery-kinds)") from None
    t0 = time.perf_counter()
    with tqdm(desc="golden calls", unit="row", disable=args.quiet) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(1)

        try:
            summary = write_golden_sft(args.rl_parquet, args.out, recovery, progress=progress)
        except GoldenSFTError as exc:
            raise UsageError(str(exc)) from None
    _out(f"wrote {summary.describe()} to {args.out} in {time.perf_counter() - t0:.1f} s")
    return 0


# -- parser --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and flag of `python -m env_registry`. Over 60 lines because it is one
    declarative table, read top to bottom as `--help` prints it."""
    p = argparse.ArgumentParser(
        prog="python -m env_registry", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    store_help = "store directory (default: $ASTRA_ENV_STORE or ./env_store)"
    p.add_argument("--store", default=DEFAULT_STORE, help=store_help)
    add_quiet(p)
    # The same two options after the command name (`generate --store x -q`); SUPPRESS keeps the
    # top-level value when they are not repeated there.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", default=argparse.SUPPRESS, help=store_help)
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    g = sub.add_parser("generate", parents=[common], help="add procedural (LLM-free) environments to the store")
    g.add_argument("--n", type=int, default=1000, help="how many distinct environments (default 1000)")
    g.add_argument("--seed", type=int, default=0, help="same seed, same environments (default 0)")
    g.add_argument("--max-hops", type=int, default=4, help="longest tool chain (default 4)")
    g.add_argument("--domains", help=f"comma-separated subset of {','.join(DOMAINS)} (default all)")
    g.add_argument("--scenario-types", help=f"comma-separated subset of {','.join(SCENARIO_TYPES)} (default all)")
    g.set_defaults(func=cmd_generate)

    a = sub.add_parser(
        "add",
        parents=[common],
        help="import environments from JSONL, validating each",
        description="Import EnvSpec JSON records (one per line). Each record is parsed, checked "
        "structurally and (unless --no-replay) replayed in the sandbox; valid ones are added, duplicates "
        "skipped, rejected ones written with file, line and reasons to the rejects file. Re-running is "
        "safe: nothing is added twice.",
    )
    a.add_argument("files", nargs="+", metavar="FILE.jsonl")
    a.add_argument("--rejects", help="rejects file (default: <FILE>.rejects.jsonl next to the input)")
    a.add_argument("--no-replay", action="store_true", help="structure only; do not run golden calls")
    a.add_argument("--concurrency", type=int, default=32, help="sandbox sessions at once (default 32)")
    a.add_argument(
        "--allow-scripted",
        action="store_true",
        help="also add environments a dry run made (provenance.scripted: no model wrote them)",
    )
    a.set_defaults(func=cmd_add)

    ia = sub.add_parser(
        "import-astra",
        parents=[common],
        help="import ASTRA's released environments (pipeline step 4/5 records; ASTRA-RL-1k rows, calls recovered)",
        description="Read ASTRA's environment data (JSON, JSONL or parquet; see env_registry.importers.astra for "
        "the formats and the field mapping). Each record becomes an environment, is checked structurally and "
        "its golden calls replayed twice in the sandbox (answers must reproduce); valid ones are added, "
        "duplicates skipped, rejected ones written with file, place and reasons to the rejects file, and "
        "counted by rule. ASTRA-RL-1k rows carry no call statements: their golden calls are recovered in the "
        "sandbox first (env_registry.recovery); rows not fully recovered are rejected with each answer's reason.",
    )
    ia.add_argument("files", nargs="+", metavar="FILE", help=".json, .jsonl or .parquet")
    ia.add_argument(
        "--domain", default=DEFAULT_DOMAIN, help=f"domain of records that name none (default {DEFAULT_DOMAIN})"
    )
    ia.add_argument("--rejects", help="rejects file, appended to (default: <STORE>.rejects.jsonl next to the store)")
    ia.add_argument("--no-replay", action="store_true", help="structure only; do not run golden calls")
    ia.add_argument("--concurrency", type=int, default=32, help="sandbox sessions at once (default 32)")
    ia.add_argument("--no-recovery", action="store_true", help="ASTRA-RL-1k rows: do not recover golden calls")
    ia.add_argument(
        "--reward-rule",
        choices=["ours", "plain"],
        default="ours",
        help="ASTRA-RL-1k rows whose calls are not all recovered: rejected (ours, default) or imported scored by "
        "the plain rule (any own-tool call whose output holds the answer; counted in the log)",
    )
    cli_rl_flags.add_recovery_options(ia)
    ia.set_defaults(func=cmd_import_astra)
    cli_rl_flags.add_parsers(sub, common).set_defaults(func=cmd_export_astra_rl)

    v = sub.add_parser("validate", parents=[common], help="check structure and replay golden calls in the sandbox")
    v.add_argument("ids", nargs="*", help="environment ids (default: all)")
    v.add_argument("--no-replay", action="store_true", help="structure only; do not run golden calls")
    v.add_argument("--concurrency", type=int, default=32, help="sandbox sessions at once (default 32)")
    v.add_argument(
        "--no-determinism",
        action="store_true",
        help="replay golden calls once, not twice (faster; tools with random ids or clocks go unnoticed)",
    )
    v.add_argument("--limit", type=int, help="validate only the first N environments")
    v.add_argument("--report", help="write every issue as JSONL here")
    v.set_defaults(func=cmd_validate)

    s = sub.add_parser("stats", parents=[common], help="counts per domain, scenario type, hops, tools per env")
    s.add_argument("--plot", metavar="OUT.png", help="also draw the distributions (matplotlib)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.set_defaults(func=cmd_stats)

    sh = sub.add_parser("show", parents=[common], help="print one environment as JSON")
    sh.add_argument("id", help="environment id or a unique prefix (>= 6 characters)")
    sh.set_defaults(func=cmd_show)

    e = sub.add_parser(
        "export-parquet",
        parents=[common],
        help="write verl RLHFDataset parquet (train/val)",
        description="Write <out>/mix_<mode>/{train,val}.parquet for verl's RLHFDataset, plus dropped.jsonl "
        "and manifest.json. See env_registry.export for the row format and the split rule.",
    )
    e.add_argument("--out", required=True, help="output folder")
    e.add_argument("--mixing", choices=["none", "random", "banded"], default="none", help="irrelevant-tool mixing")
    e.add_argument("--k", type=int, default=1, help="banded: distractors per band per tool (default 1)")
    e.add_argument("--random-min", type=int, default=5, help="random: fewest distractors (default 5)")
    e.add_argument("--random-max", type=int, default=9, help="random: most distractors (default 9)")
    e.add_argument(
        "--embedding-model",
        help="banded: similarity model: minilm (all-MiniLM-L6-v2 on onnxruntime; default with the `embed` extra), lexical "
        "(TF-IDF; the default without it), or a local sentence-transformers model path",
    )
    e.add_argument("--seed", type=int, default=0, help="split and mixing seed (default 0)")
    e.add_argument("--val-fraction", type=float, default=0.1, help="share of question groups in val (default 0.1)")
    e.add_argument("--system-prompt", default=None, help="system message (default: a short tool-use instruction)")
    e.add_argument("--no-system-prompt", action="store_true", help="user message only")
    e.add_argument(
        "--interaction", default=DEFAULT_INTERACTION, help=f"interaction hook name (default {DEFAULT_INTERACTION})"
    )
    e.add_argument("--tokenizer", help="tokenizer path: measure each prompt with the row's tools")
    e.add_argument("--max-prompt-length", type=int, help="drop rows whose prompt is longer (needs --tokenizer)")
    e.add_argument("--domains", help="export only these domains (comma-separated)")
    e.add_argument(
        "--rows",
        choices=["self-contained", "store"],
        default="self-contained",
        help="self-contained (default): each row carries its environment and distractors, so the parquet "
        "works from any folder or node; store: rows name this store's absolute path (smaller; every node "
        "must see the store there)",
    )
    e.set_defaults(func=cmd_export)

    gs = sub.add_parser(
        "export-sft",
        parents=[common],
        help="golden demonstrations of exported RL rows as SFT parquet",
        description="One SFT conversation per row of an RL parquet written by export-parquet: the row's prompt "
        "and tools, each tool-needing sub-question's golden call with its real sandbox output, then the final "
        "answer; a share of them also shows a failed call with the error the agent loop gives and the corrected "
        "call. Same format as `data_synth traj export` (see env_registry.golden_sft).",
    )
    gs.add_argument("rl_parquet", help="an export-parquet file, e.g. <out>/mix_none/train.parquet")
    gs.add_argument("--out", required=True, help="SFT parquet to write")
    gs.add_argument(
        "--recovery-share",
        type=float,
        default=0.2,
        help="share of rows showing a failed call, its real error and the corrected call (default 0.2; 0: none)",
    )
    gs.add_argument(
        "--recovery-kinds",
        default=",".join(RECOVERY_KINDS),
        help=f"comma-separated failure kinds, assigned in turn (default {','.join(RECOVERY_KINDS)})",
    )
    gs.add_argument("--seed", type=int, default=0, help="which rows, calls and kinds (default 0)")
    gs.set_defaults(func=cmd_export_sft)

    sc = sub.add_parser("schema", parents=[common], help="print the JSON Schema of the environment format")
    sc.set_defaults(func=cmd_schema)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: _loaded(args))


def _loaded(args: argparse.Namespace) -> int:
    """The command after `_load`, both inside `run_cli` (Ctrl-C during the imports: one line, exit 130)."""
    _load()
    return args.func(args)


def _or_default(value: str | None, default: str) -> str:
    return default if value is None else value


if __name__ == "__main__":
    sys.exit(main())
