"""The flags of the ASTRA-RL-1k subcommands (`export-astra-rl`, `recover-calls`, import-astra's
recovery options), apart from their commands (`env_registry.cli_rl`): the commands load the
sandbox, sympy and jsonschema, and `--help` must answer without them (tests/test_cli_help.py)."""

from __future__ import annotations

import argparse
from typing import Any

from astra_foundation.clikit import add_output_file
from astra_foundation.llm.config import add_llm_arguments


class _BudgetDefaults:
    """`env_registry.recovery.Budget`'s defaults, for the flags' help (tests/test_cli_help.py
    checks they equal the originals)."""

    calls_per_tool = 1000
    seconds_per_row = 60.0


BUDGET = _BudgetDefaults()


def add_recovery_options(p: argparse.ArgumentParser) -> None:
    b = BUDGET
    p.add_argument(
        "--calls-per-tool",
        type=int,
        default=b.calls_per_tool,
        help=f"most candidate calls per tool (default {b.calls_per_tool})",
    )
    p.add_argument(
        "--seconds-per-row",
        type=float,
        default=b.seconds_per_row,
        help=f"search time per row (default {b.seconds_per_row:g})",
    )
    add_llm_arguments(
        p, what="optional: proposes calls for answers the LLM-free search does not find", shared=("concurrency",)
    )


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """`export-astra-rl` and `recover-calls`; the first's parser is returned for the caller to
    bind to its command (which opens the store)."""
    x = sub.add_parser(
        "export-astra-rl",
        parents=[common],
        help="write the store's environments as ASTRA-RL-1k rows (calls stripped)",
        description="One ASTRA-RL-1k row (prompt, tool_schema, tool_dict, sub_qa_dict) per environment, as JSONL. "
        "Golden calls, sub-question texts, dependencies and final answers are stripped, as the release strips "
        "them (see env_registry.export_rl).",
    )
    add_output_file(x, "JSONL file to write")
    x.add_argument("--limit", type=int, help="only the first N environments")
    x.add_argument("--domains", help="only these domains (comma-separated)")
    x.add_argument("--no-system-prompt", action="store_true", help="user message only")

    r = sub.add_parser(
        "recover-calls",
        parents=[common],
        help="recover the golden calls of ASTRA-RL-1k rows in the sandbox (adds nothing to a store)",
        description="Search each sound ASTRA-RL-1k row's golden calls (see env_registry.recovery): candidate "
        "calls from the task text, schemas and accepted outputs, run in the sandbox, accepted only when one "
        "call (up to argument order) produces an answer and reproduces it in two fresh sessions.",
    )
    r.add_argument("files", nargs="+", metavar="FILE", help=".json, .jsonl or .parquet")
    add_output_file(r, "JSONL: per row what was recovered, how, and why not")
    r.add_argument("--concurrency", type=int, default=8, help="rows searched at once (default 8)")
    add_recovery_options(r)
    r.set_defaults(run="env_registry.cli_rl:cmd_recover_calls")  # imported when it runs
    return x
