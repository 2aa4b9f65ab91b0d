"""`python -m env_registry export-parquet`, `export-sft` and `export-astra-rl`: the store as verl
RL rows, as golden SFT demonstrations, as ASTRA-RL-1k rows."""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from astra_foundation.clikit import UsageError
from astra_foundation.strict import SettingsError
from env_registry import cli_rl
from env_registry.commands.common import csv, open_store, say
from env_registry.export import DEFAULT_SYSTEM_PROMPT, ExportConfig, export_rows, write_export
from env_registry.golden_sft import NoTool, Recovery, write_golden_sft
from env_registry.mixing import build_mixer
from env_registry.variants import LLMUserConfig, VariantShares, select_shares


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


def _user(args: argparse.Namespace) -> LLMUserConfig | None:
    """The LLM user of missing-value rows (`--user-base-url/--user-model`), None: the scripted one."""
    if not args.user_base_url and not args.user_model:
        return None
    if not (args.user_base_url and args.user_model):
        raise UsageError(
            "export-parquet: an LLM user needs both --user-base-url and --user-model (leave both out for the "
            "scripted user)"
        )
    return LLMUserConfig(base_url=args.user_base_url, model=args.user_model)


def cmd_export(args: argparse.Namespace) -> int:
    if args.max_prompt_length is not None and not args.tokenizer:
        raise UsageError("--max-prompt-length needs --tokenizer (prompts are measured with its chat template)")
    user = _user(args)
    store = open_store(args)
    domains = set(csv(args.domains) or [])
    envs = store.filter(lambda e: e.domain in domains) if domains else store
    if args.variants:
        try:
            envs = select_shares(envs, VariantShares.parse(args.variants), args.seed)
        except ValueError as exc:
            raise UsageError(f"export-parquet {exc}") from None
    envs = list(envs)
    variants = Counter(e.variant.value for e in envs)
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
        user=user,
    )
    t0 = time.perf_counter()
    result = export_rows(
        store, envs, config=config, mixer=_mixer(args, store), tokenizer=tokenizer, progress=not args.quiet
    )
    folder = write_export(
        result, args.out, config, {"store": str(Path(args.store).resolve()), "tokenizer": args.tokenizer}
    )
    dt = time.perf_counter() - t0
    n_rows = len(result.train) + len(result.val)
    say(f"\nexported {n_rows} rows in {dt:.1f} s to {folder}")
    say(f"  train {len(result.train)}, val {len(result.val)} (val fraction {args.val_fraction}, grouped by question)")
    say(f"  mixing {json.dumps(result.mixing)}; {result.distractors / max(n_rows, 1):.2f} distractors per row")
    if set(variants) != {"answerable"}:
        say("  variants: " + ", ".join(f"{v} {n}" for v, n in sorted(variants.items())))
    if user is not None:
        say(f"  missing_value rows' user: {user.describe()} at {user.base_url} ({variants['missing_value']} rows)")
    if tokenizer is not None:
        lengths = [json.loads(r["extra_info"]["astra"])["prompt_tokens"] for r in result.train + result.val]
        if lengths:
            lengths.sort()
            say(f"  prompt tokens: median {lengths[len(lengths) // 2]}, max {lengths[-1]}")
    if result.dropped:
        say(
            f"  dropped {len(result.dropped)} rows over {args.max_prompt_length} prompt tokens (list: {folder / 'dropped.jsonl'}):"
        )
        for d in result.dropped[:5]:
            say(f"    {d.env_id} ({d.split}): {d.prompt_tokens} tokens")
    return 0


def cmd_export_sft(args: argparse.Namespace) -> int:
    try:
        recovery = Recovery(share=args.recovery_share, kinds=tuple(csv(args.recovery_kinds) or ()), seed=args.seed)
        no_tool = NoTool(share=args.no_tool_share, seed=args.seed)
    except SettingsError as exc:
        raise UsageError(f"{exc} (--recovery-share, --recovery-kinds, --no-tool-share)") from None
    t0 = time.perf_counter()
    with tqdm(desc="golden calls", unit="row", disable=args.quiet) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(1)

        summary = write_golden_sft(args.rl_parquet, args.output_file, recovery, progress=progress, no_tool=no_tool)
    say(f"wrote {summary.describe()} to {args.output_file} in {time.perf_counter() - t0:.1f} s")
    return 0


def cmd_export_astra_rl(args: argparse.Namespace) -> int:
    return cli_rl.cmd_export_astra_rl(args, open_store(args))


def _or_default(value: str | None, default: str) -> str:
    return default if value is None else value
