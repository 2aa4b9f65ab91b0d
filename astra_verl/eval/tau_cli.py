"""The flags of `python -m astra_verl.eval tau`, `tau-export` and `tau-report`, apart from their commands
(`astra_verl.eval.tau_eval`, which loads transformers, verl and the sandbox): `--help` answers
without them (tests/test_cli_help.py)."""

from __future__ import annotations

import argparse
from typing import Any

from astra_foundation.clikit import add_quiet, refuse_renamed
from astra_foundation.llm.config import add_llm_arguments


def _user_endpoint(p: argparse.ArgumentParser) -> None:
    """τ-bench's simulated user: the second endpoint, `--user-base-url/--user-model` (required: llm)
    and its `--user-timeout`."""
    add_llm_arguments(
        p,
        "user",
        "the simulated user's model (required with --user llm)",
        only=("base-url", "model", "timeout"),
        defaults={"base_url": "", "model": ""},
        from_env=False,
    )
    p.add_argument(
        "--user-max-tokens",
        type=int,
        default=None,
        metavar="N",
        help="tokens per simulated-user turn (default: the client's 4096; a small model as user can ramble for "
        "thousands of tokens, which on CPU outlasts the request timeout: 256 is plenty for a customer's message)",
    )


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tau",
        help="evaluate a checkpoint or an endpoint on τ-bench (pass^1, pass^k with --n)",
        description="Run τ-bench's tasks of one domain and split through astra_tool_agent with τ-bench's "
        "simulated user and score them with τ-bench's reward (docs/tau-bench.md). Resumable. --timeout "
        "applies to the policy's endpoint, --user-timeout to the user's.",
    )
    p.add_argument("--domain", required=True, choices=["retail", "airline"])
    p.add_argument("--split", default="test", help="retail: train, dev, test; airline: test (default test)")
    p.add_argument("--model-path", required=True, help="a checkpoint (served by hf_cpu; with --base-url its tokenizer)")
    add_llm_arguments(
        p,
        what="optional: an endpoint serving the policy",
        only=("base-url", "model", "api-key-env", "timeout"),
        from_env=False,
    )
    p.add_argument("--user", default="llm", choices=["llm", "scripted"], help="the simulated user (default llm)")
    _user_endpoint(p)
    p.add_argument("--out", default=None, help="output folder (default runs/eval_tau/<policy>_<domain>_<split>)")
    p.add_argument("--recipe", default="astra_cpu", help="the recipe the episodes run under (default astra_cpu)")
    p.add_argument(
        "--set", dest="override", action="append", default=[], metavar="KEY=VALUE", help="a Hydra override (repeatable)"
    )
    p.add_argument("--temperature", type=float, default=None, help="sample at T (default: val_kwargs, greedy)")
    p.add_argument("--n", type=int, default=1, help="samples per task, for pass^k (needs --temperature > 0)")
    p.add_argument("--concurrency", type=int, default=4, help="episodes in flight")
    p.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    p.add_argument("--label", default="", help="the policy's name in the table")
    add_quiet(p)


def add_export_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tau-export",
        help="write τ-bench rows (a self-contained parquet) for training or verl's validation",
        description="Write <out>/<domain>_<split>.parquet and its manifest: one self-contained row per τ-bench "
        "task with the tau_user hook and the astra_tau reward (docs/tau-bench.md); the parquet alone travels to "
        "any node. The LLM user's endpoint is required (it is written into the rows); --user scripted for dry runs.",
    )
    p.add_argument("--domain", required=True, choices=["retail", "airline"])
    p.add_argument("--split", required=True, help="retail: train, dev, test; airline: test")
    p.add_argument("--out", required=True, help="output folder (e.g. runs/tau_data)")
    p.add_argument("--user", default="llm", choices=["llm", "scripted"], help="the simulated user (default llm)")
    _user_endpoint(p)
    p.add_argument("--limit", type=int, default=None, help="only the first N tasks")
    # the rows hold no policy endpoint: `--timeout` would be the endpoint's (docs/cli.md)
    refuse_renamed(p, "--timeout", "--user-timeout", "the rows hold only the simulated user's endpoint")


def add_report_parser(sub: Any) -> None:
    p = sub.add_parser(
        "tau-report",
        help="one table and plot over several `eval tau` runs (a row per domain and split)",
        description="Read the results.jsonl of each `eval tau` run directory and print pass^k, the database "
        "match, required outputs, calls, user turns and seconds per episode per domain/split; write the plot.",
    )
    p.add_argument("runs", nargs="+", help="`eval tau` run directories")
    p.add_argument("--plot", default="runs/eval_tau/tau.png", help="the plot's path (default runs/eval_tau/tau.png)")
    p.add_argument("--title", default="", help="the table's and plot's title (default: the policies)")


def cmd_report(args: argparse.Namespace) -> int:
    from astra_verl.eval import tau_eval

    return tau_eval.cmd_report(args)


def cmd_tau(args: argparse.Namespace) -> int:
    from astra_verl.eval import tau_eval

    return tau_eval.cmd_tau(args)


def cmd_export(args: argparse.Namespace) -> int:
    from astra_verl.eval import tau_eval

    return tau_eval.cmd_export(args)
