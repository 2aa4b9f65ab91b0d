"""`python -m env_registry`: build, check, inspect and export a store of ASTRA environments.

    python -m env_registry --store envs generate --n 2000 --seed 0
    python -m env_registry --store envs add synthesized.jsonl
    python -m env_registry --store envs import-astra step5_merged.json
    python -m env_registry --store envs derive-variants --family astra_env_synth
    python -m env_registry --store envs export-astra-rl --output-file rl_rows.jsonl
    python -m env_registry recover-calls rl_rows.jsonl --output-file recovered.jsonl
    python -m env_registry --store envs validate
    python -m env_registry --store envs stats --plot stats.png
    python -m env_registry --store envs show 3f2a9c...
    python -m env_registry --store envs export-parquet --out data --mixing banded --tokenizer /models/qwen
    python -m env_registry schema

The store defaults to $ASTRA_ENV_STORE, else ./env_store. Exit status (as every astra-verl
command line, `astra_foundation.clikit`): 0 when everything passed, 1 when some record or environment
was rejected or failed validation, 2 when the command could not run (usage, unreadable input,
unwritable output), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from astra_foundation.clikit import add_output_file, add_quiet, run_cli
from astra_foundation.llm.config import add_llm_arguments
from env_registry import cli_rl_flags

# This module only parses. Each subcommand names its command ("MODULE:FUNCTION", mostly in
# env_registry.commands), imported when it runs: the commands' modules (sympy, pyarrow, networkx,
# jsonschema: over a second) stay out of `--help`. The flags' help needs a few of their names:
# copies here, checked equal to the originals by tests/test_cli_help.py.
DOMAINS = ("geography", "finance", "people", "retail", "climate", "events")  # families.procedural.DOMAINS
SCENARIO_TYPES = ("single_hop", "multi_hop", "parallel_single_hop", "parallel_multi_hop")  # spec.ScenarioType
RECOVERY_KINDS = ("wrong_argument", "unknown_tool", "malformed")  # golden_sft.RECOVERY_KINDS
DEFAULT_DOMAIN = "astra"  # importers.astra.DEFAULT_DOMAIN
DEFAULT_INTERACTION = "astra_default"  # export.DEFAULT_INTERACTION
DEFAULT_STORE = os.environ.get("ASTRA_ENV_STORE", "env_store")
_C = "env_registry.commands."


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and flag of `python -m env_registry`, one function per subcommand."""
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

    for add in (
        _generate,
        _add,
        _import_astra,
        _derive_variants,
        _validate,
        _stats,
        _show,
        _export_parquet,
        _export_sft,
        _schema,
    ):
        add(sub, common)
    return p


def _generate(sub: Any, common: argparse.ArgumentParser) -> None:
    g = sub.add_parser("generate", parents=[common], help="add procedural (LLM-free) environments to the store")
    g.add_argument("--n", type=int, default=1000, help="how many distinct environments (default 1000)")
    g.add_argument("--seed", type=int, default=0, help="same seed, same environments (default 0)")
    g.add_argument("--max-hops", type=int, default=4, help="longest tool chain (default 4)")
    g.add_argument("--domains", help=f"comma-separated subset of {','.join(DOMAINS)} (default all)")
    g.add_argument("--scenario-types", help=f"comma-separated subset of {','.join(SCENARIO_TYPES)} (default all)")
    g.add_argument(
        "--variants",
        default="answerable=1",
        help="shares of each variant, VARIANT=SHARE,... summing to 1 (answerable, unanswerable, missing_value, "
        "missing_function, no_tool), or 'mix' for the recommended 0.6 answerable and 0.1 of each other "
        "(default answerable=1; docs/environments.md, 'Variants')",
    )
    g.set_defaults(run=_C + "generate:cmd_generate")


def _add(sub: Any, common: argparse.ArgumentParser) -> None:
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
    _admission_flags(
        a,
        rejects="rejects file (default: <FILE>.rejects.jsonl next to the input)",
        scripted="also add environments a dry run made (provenance.scripted: no model wrote them)",
    )
    a.set_defaults(run=_C + "add:cmd_add")


def _admission_flags(p: argparse.ArgumentParser, rejects: str, scripted: str) -> None:
    """The flags of the commands that admit environments into a store (`add`, `derive-variants`):
    one validation path (commands.common.admit), so one spelling of its knobs."""
    p.add_argument("--rejects", help=rejects)
    p.add_argument("--no-replay", action="store_true", help="structure only; do not run golden calls")
    p.add_argument("--concurrency", type=int, default=32, help="sandbox sessions at once (default 32)")
    p.add_argument("--allow-scripted", action="store_true", help=scripted)


def _import_astra(sub: Any, common: argparse.ArgumentParser) -> None:
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
    ia.set_defaults(run=_C + "import_astra:cmd_import_astra")
    cli_rl_flags.add_parsers(sub, common).set_defaults(run=_C + "export:cmd_export_astra_rl")


def _derive_variants(sub: Any, common: argparse.ArgumentParser) -> None:
    d = sub.add_parser(
        "derive-variants",
        parents=[common],
        help="add variants (unanswerable, missing_value, ...) of the store's answerable environments, validating each",
        description="Make the variants of the store's answerable environments of every family (procedural, "
        "synthesized, imported; env_registry.variant_makers; docs/environments.md, 'Variants'): each variant "
        "is checked structurally and its golden calls replayed twice in the sandbox, as `add` checks a record; "
        "valid ones are added, rejected ones written with their reasons to the rejects file. Prints per variant "
        "how many were made, were already in the store, were added, failed validation, and how many "
        "environments could not carry it, by reason. BFCL and tau-bench environments (validated by their own "
        "checkers) are not read. A variant's id is its content hash: rerunning adds nothing twice. Exit 1 when "
        "a made variant failed validation or there was nothing to derive from.",
    )
    d.add_argument(
        "--make",
        metavar="VARIANT[,...]",
        help="comma-separated variants to make (default all: unanswerable,missing_value,missing_function,no_tool)",
    )
    d.add_argument(
        "--family",
        metavar="GENERATOR[,...]",
        help="comma-separated families by provenance generator, e.g. procedural, astra_env_synth (synthesized), "
        "astra_import (import-astra); default every family",
    )
    d.add_argument(
        "--limit", type=int, metavar="N", help="read only the first N answerable environments (of those families)"
    )
    _admission_flags(
        d,
        rejects="rejects file, appended to (default: <STORE>.rejects.jsonl next to the store)",
        scripted="also derive from environments a dry run made (provenance.scripted), as `add --allow-scripted` adds them",
    )
    d.set_defaults(run=_C + "derive_variants:cmd_derive_variants")


def _validate(sub: Any, common: argparse.ArgumentParser) -> None:
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
    v.set_defaults(run=_C + "validate:cmd_validate")


def _stats(sub: Any, common: argparse.ArgumentParser) -> None:
    s = sub.add_parser("stats", parents=[common], help="counts per domain, scenario type, hops, tools per env")
    s.add_argument("--plot", metavar="OUT.png", help="also draw the distributions (matplotlib)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.set_defaults(run=_C + "stats:cmd_stats")


def _show(sub: Any, common: argparse.ArgumentParser) -> None:
    sh = sub.add_parser("show", parents=[common], help="print one environment as JSON")
    sh.add_argument("id", help="environment id or a unique prefix (>= 6 characters)")
    sh.set_defaults(run=_C + "show:cmd_show")


def _export_parquet(sub: Any, common: argparse.ArgumentParser) -> None:
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
    add_llm_arguments(
        e,
        "user",
        "optional: an LLM that words the missing_value rows' user (written into their interaction_kwargs); "
        "default: their scripted user",
        only=("base-url", "model"),
        from_env=False,
    )
    e.add_argument("--tokenizer", help="tokenizer path: measure each prompt with the row's tools")
    e.add_argument("--max-prompt-length", type=int, help="drop rows whose prompt is longer (needs --tokenizer)")
    e.add_argument("--domains", help="export only these domains (comma-separated)")
    e.add_argument(
        "--variants",
        help="keep the largest subset of the store whose variants come in these shares (VARIANT=SHARE,... "
        "summing to 1, or 'mix': 0.6 answerable, 0.1 of each other; default: every environment, the "
        "store's own mix; docs/training.md)",
    )
    e.add_argument(
        "--rows",
        choices=["self-contained", "store"],
        default="self-contained",
        help="self-contained (default): each row carries its environment and distractors, so the parquet "
        "works from any folder or node; store: rows name this store's absolute path (smaller; every node "
        "must see the store there)",
    )
    e.set_defaults(run=_C + "export:cmd_export")


def _export_sft(sub: Any, common: argparse.ArgumentParser) -> None:
    gs = sub.add_parser(
        "export-sft",
        parents=[common],
        help="golden demonstrations of exported RL rows as SFT parquet",
        description="One SFT conversation per row of an RL parquet written by export-parquet: the row's prompt "
        "and tools, each tool-needing sub-question's golden call with its real sandbox output, then the final "
        "answer; a share of them also shows a failed call with the error the agent loop gives and the corrected "
        "call, and a share (--no-tool-share) is repeated with none of its own tools and no call. Same format as `data_synth traj export` (see env_registry.golden_sft).",
    )
    gs.add_argument("rl_parquet", help="an export-parquet file, e.g. <out>/mix_none/train.parquet")
    add_output_file(gs, "SFT parquet to write")
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
    gs.add_argument(
        "--no-tool-share",
        type=float,
        default=0.0,
        help="share of rows also written with other domains' tools only and a reply that makes no call, so the "
        "model learns to decline when no tool fits (BFCL's irrelevance); default 0",
    )
    gs.add_argument("--seed", type=int, default=0, help="which rows, calls, kinds and no-tool tools (default 0)")
    gs.set_defaults(run=_C + "export:cmd_export_sft")


def _schema(sub: Any, common: argparse.ArgumentParser) -> None:
    sc = sub.add_parser("schema", parents=[common], help="print the JSON Schema of the environment format")
    sc.set_defaults(run=_C + "show:cmd_schema")


# Commands that add to the store: what they added stays, and a rerun skips it (duplicates by id).
ADDS_TO_THE_STORE = {"generate", "add", "import-astra", "derive-variants"}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    resumes = args.command in ADDS_TO_THE_STORE
    return run_cli(lambda: _run(args), resumes=resumes, saved="the environments added so far are in the store")


def _run(args: argparse.Namespace) -> int:
    """Import the subcommand's module and run it, inside `run_cli` (Ctrl-C during the imports: one
    line, exit 130)."""
    module, _, function = args.run.partition(":")
    return getattr(importlib.import_module(module), function)(args)


if __name__ == "__main__":
    sys.exit(main())
