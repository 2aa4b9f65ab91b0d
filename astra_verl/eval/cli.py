"""`python -m astra_verl.eval`: a policy on held-out astra environments; BFCL v4 multi-turn on astra-verl's stack.

    # a checkpoint on exported environments, episodes as main_ppo's validation runs them (greedy)
    python -m astra_verl.eval envs --data runs/envs/mix_none/val.parquet --model-path CKPT/huggingface
    # ... sampled: 4 episodes per row at temperature 0.5
    python -m astra_verl.eval envs --data VAL.parquet --model-path CKPT --temperature 0.5 --n 4
    # ... served by vLLM (`vllm serve CKPT`): token prompts in, token ids out
    python -m astra_verl.eval envs --data VAL.parquet --model-path CKPT --base-url http://localhost:8000/v1 --model CKPT
    # ... the missing-value rows' user worded by an LLM (default: the rows' scripted user)
    python -m astra_verl.eval envs --data VAL.parquet --model-path CKPT --user-base-url http://localhost:8001/v1 --user-model USER

    # evaluate a served model (vLLM or any OpenAI-compatible endpoint with tool calling)
    python -m astra_verl.eval bfcl --base-url http://localhost:8000/v1 --model Qwen/Qwen3-8B
    # the rows for verl validation:  main_ppo +recipe=astra_bfcl_eval astra.bfcl_dir=runs/bfcl_data
    python -m astra_verl.eval bfcl-export --out runs/bfcl_data
    # re-score a results file offline (BFCL's checker, in the sandbox)
    python -m astra_verl.eval bfcl-score runs/bfcl/<model>/results.jsonl
    # faithfulness: replay BFCL's ground truth through the adapter (and a broken variant)
    python -m astra_verl.eval bfcl-replay [--wrong] [--via agent-loop --model-path DIR]

`envs` prints F1 (± standard error), solved rate, turns, calls, invalid and distractor rates, by
domain, scenario type, hop count and variant, and draws them (`<out>/envs.png`). The BFCL commands print
the per-category table of the ASTRA paper (Base, Miss Func, Miss Param, Long Context, Overall)
and the failure causes. Runs are resumable: rerun the same command and only unscored entries
(episodes) run again (Ctrl-C stops cleanly, keeping every scored entry). Before the first entry
the endpoint is checked (reachable, key accepted, model served). Exit status: 0 done, 1 some
entry could not run, 2 the command could not start, 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from astra_foundation.clikit import UsageError, add_output_file, add_quiet, refuse_renamed, run_async, run_cli
from astra_foundation.llm.config import ENDPOINT, SERVED, add_llm_arguments
from astra_verl.eval import bfcl_single_cli, tau_cli  # light: their heavy imports are inside the commands

# Every command imports what it needs when it runs (verl, transformers, bfcl_eval, the sandbox,
# the LLM client take seconds): `--help` and a usage error answer at once, and Ctrl-C during
# those imports is `run_cli`'s one line and exit 130. Only the standard library and clikit here.

# env_registry.families.bfcl.CATEGORIES, for the flags' help (that module imports pyarrow and the
# store: a second); tests/test_cli_help.py checks the two are equal.
CATEGORIES = ("base", "miss_func", "miss_param", "long_context")
DEFAULT_TEMPERATURE = 0.001  # BFCL's generation default


def _categories(text: str) -> list[str]:
    names = [c.strip() for c in text.split(",") if c.strip()]
    bad = [c for c in names if c not in CATEGORIES]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown categories {bad}; choose from {', '.join(CATEGORIES)}")
    return names


def _selection(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--categories",
        type=_categories,
        default=list(CATEGORIES),
        help=f"comma-separated, default all: {','.join(CATEGORIES)}",
    )
    p.add_argument("--ids", default=None, help="comma-separated BFCL entry ids (e.g. multi_turn_base_0)")
    p.add_argument("--limit", type=int, default=None, help="only the first N entries of each category")


def _sandbox(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sandbox-workers", type=int, default=None, help="sandbox worker processes (default min(4, CPUs))")
    p.add_argument("--call-timeout", type=float, default=30.0, help="seconds per tool call / checker run (default 30)")


def _user_endpoint(p: argparse.ArgumentParser) -> None:
    """The missing-value rows' LLM user, `--user-base-url/--user-model` (as `eval tau`'s user and
    `env_registry export-parquet`'s): both or neither (the scripted user)."""
    add_llm_arguments(
        p,
        "user",
        "optional: an LLM that words the missing_value rows' user; default: their scripted user",
        only=("base-url", "model"),
        from_env=False,
    )


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand and flag of `python -m astra_verl.eval`. Over 60 lines because it is one
    declarative table, read top to bottom as `--help` prints it."""
    parser = argparse.ArgumentParser(
        prog="python -m astra_verl.eval", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    envs = sub.add_parser(
        "envs",
        help="evaluate a checkpoint on exported astra environments (astra_tool_agent episodes, F1)",
        description="Run every row of an `env_registry export-parquet` file through astra_tool_agent with a "
        "local checkpoint served by the hf_cpu backend, score each episode with the config's reward manager "
        "(astra_f1), and print the table by domain, scenario type, hop count and variant. Greedy by default (what "
        "main_ppo's validation runs); --temperature T --n K samples K episodes per row.",
    )
    envs.add_argument("--data", required=True, help="an export-parquet file (e.g. .../mix_none/val.parquet)")
    envs.add_argument(
        "--model-path",
        required=True,
        help="a Hugging Face checkpoint directory, served by hf_cpu (with --base-url: its tokenizer and template)",
    )
    add_llm_arguments(
        envs, what="optional: vLLM serving the policy, token prompts in", only=(*ENDPOINT, "timeout"), from_env=False
    )
    _user_endpoint(envs)
    envs.add_argument("--out", default=None, help="output folder (default runs/eval_envs/<checkpoint>_<data>)")
    envs.add_argument("--recipe", default="astra_cpu", help="the recipe the episodes run under (default astra_cpu)")
    envs.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Hydra override of the trainer config (repeatable), e.g. data.max_response_length=1024",
    )
    envs.add_argument("--temperature", type=float, default=None, help="sample at T (default: val_kwargs, greedy)")
    envs.add_argument("--top-p", type=float, default=None, help="default: val_kwargs.top_p")
    envs.add_argument("--n", type=int, default=1, help="episodes per row (needs --temperature > 0 when > 1)")
    envs.add_argument("--concurrency", type=int, default=8, help="episodes in flight, batched by the server")
    envs.add_argument("--limit", type=int, default=None, help="only the first N rows")
    envs.add_argument("--seed", type=int, default=0, help="torch seed of the sampling (default 0)")
    envs.add_argument("--label", default="", help="the policy's name in the table and plot")
    add_quiet(envs)

    run = sub.add_parser("bfcl", help="evaluate an OpenAI-compatible endpoint on BFCL multi-turn")
    _selection(run)
    run.add_argument("--out", default=None, help="output folder (default runs/bfcl/<model>)")
    run.add_argument("--concurrency", type=int, default=16, help="episodes (and requests) in flight (default 16)")
    add_llm_arguments(
        run,
        what="the evaluated model",
        temperature=DEFAULT_TEMPERATURE,  # BFCL's generation default
        defaults={"timeout": 300.0},
        required=True,
        only=SERVED,
        from_env=False,
        shared=("concurrency",),  # episodes in flight, each one request at a time
    )
    run.add_argument(
        "--holdout-message",
        choices=("fc", "prompting"),
        default="fc",
        help="miss_func turns: 'fc' grows the request's tool list and sends BFCL's FC message (default); "
        "'prompting' also lists the new functions in the message, as astra_tool_agent must",
    )
    run.add_argument("--no-messages", action="store_true", help="do not keep conversations in the results file")
    add_quiet(run)
    _sandbox(run)

    export = sub.add_parser(
        "bfcl-export", help="write the BFCL environments and verl rows (for +recipe=astra_bfcl_eval)"
    )
    export.add_argument("--out", required=True, help="output folder (store/, <category>.parquet, all.parquet)")
    _selection(export)
    export.add_argument("--tokenizer", default=None, help="tokenizer dir: measure prompts (RowInfo.prompt_tokens)")
    export.add_argument("--max-prompt-length", type=int, default=None, help="drop rows whose prompt is longer")

    score = sub.add_parser("bfcl-score", help="re-score a results file offline and print the table")
    score.add_argument("results", help="results.jsonl of a `bfcl` or `bfcl-replay` run")
    score.add_argument("--store", default=None, help="environment store (default: <results dir>/store)")
    add_output_file(score, "also write the re-scored records to this file", required=False)
    refuse_renamed(score, "--write", "--output-file FILE", "one name for a command's output file")
    add_quiet(score)
    _sandbox(score)

    replay = sub.add_parser("bfcl-replay", help="replay BFCL's ground truth through the adapter and score it")
    _selection(replay)
    replay.add_argument("--out", default="runs/bfcl_replay", help="output folder (default runs/bfcl_replay)")
    replay.add_argument("--wrong", action="store_true", help="replay a broken sequence (last call dropped): must fail")
    replay.add_argument(
        "--via",
        choices=("chat", "agent-loop"),
        default="chat",
        help="drive episodes through the chat runner (the CLI's path, default) or astra_tool_agent",
    )
    replay.add_argument(
        "--model-path", default=None, help="--via agent-loop: a Hugging Face checkpoint folder (tokenizer and model)"
    )
    refuse_renamed(replay, "--model-dir", "--model-path", "one name for a local checkpoint in every command")
    replay.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="--via agent-loop: a Hydra override of the trainer config (repeatable), e.g. data.max_prompt_length=32768",
    )
    replay.add_argument("--concurrency", type=int, default=8, help="episodes in flight (default 8)")
    replay.add_argument(
        "--no-observations", action="store_true", help="skip comparing observations with BFCL's executor"
    )
    _sandbox(replay)
    bfcl_single_cli.add_parser(sub)  # BFCL single-turn: declared there, heavy imports inside the command
    tau_cli.add_parser(sub)
    tau_cli.add_export_parser(sub)
    tau_cli.add_report_parser(sub)
    return parser


def sandbox_config(args: argparse.Namespace, concurrency: int) -> Any:
    from astra_foundation.sandbox import SandboxConfig
    from astra_verl.benchmarks.bfcl_score import PRELOAD_MODULES, REQUIRED_PACKAGES
    from env_registry.families.bfcl import MAX_OUTPUT_CHARS

    kw: dict[str, Any] = {
        "packages": list(REQUIRED_PACKAGES),
        "preload": list(PRELOAD_MODULES),
        "call_timeout_s": float(args.call_timeout),
        "max_output_chars": MAX_OUTPUT_CHARS,
        "max_sessions": max(16, 4 * concurrency),
    }
    if args.sandbox_workers:
        kw["workers"] = args.sandbox_workers
    return SandboxConfig(**kw)


def _ids(args: argparse.Namespace) -> list[str] | None:
    return [i.strip() for i in args.ids.split(",") if i.strip()] if args.ids else None


def _report(results, categories, model: str) -> None:
    from astra_verl.eval.bfcl_run import format_causes, format_table, summarize

    scores = summarize(results.records.values(), categories)
    print(format_table(scores, model))
    print("failure causes: " + format_causes(scores).replace("\n", "\n  "))
    print(f"results: {results.path}")


# -- bfcl ---------------------------------------------------------------------------------------


def run_dir(args: argparse.Namespace) -> Path:
    return Path(args.out or Path("runs") / "bfcl" / re.sub(r"[^\w.-]+", "_", args.model))


def cmd_bfcl(args: argparse.Namespace) -> int:
    from astra_foundation.llm import LLMConfig, LLMFlags, LLMUnavailable, build_client, preflight
    from astra_foundation.sandbox import SandboxPool
    from astra_verl.benchmarks import bfcl_hook  # noqa: F401  - registers the hook
    from astra_verl.eval.bfcl_run import evaluate, prepare, results_file
    from astra_verl.eval.chat_rollout import ChatRollout

    out = run_dir(args)
    llm = LLMConfig.from_args(args)
    preflight(llm, flags=LLMFlags())
    results = results_file(out / "results.jsonl", args.model)  # another model's file: refused before any work
    data = prepare(out / "store", args.categories, ids=_ids(args), limit=args.limit)
    print(f"BFCL multi-turn: {len(data.entries)} entries, {llm.describe()}; run dir {out}", file=sys.stderr)

    async def main() -> dict[str, int]:
        client = build_client(llm, cache_path=out / "llm_cache.sqlite")
        try:
            async with SandboxPool(sandbox_config(args, args.concurrency)) as pool:
                rollout = ChatRollout(
                    client,
                    pool,
                    step="bfcl.agent",
                    # OpenAI function calling: BFCL's FC handler decodes its calls (bfcl_score.CallStyle)
                    hook_overrides={"list_added_tools": args.holdout_message == "prompting", "call_style": "fc"},
                )

                async def episode(i: int):
                    result = await rollout.run(data.rows[i])
                    return result.log, result.messages, result.usage

                return await evaluate(
                    data,
                    episode,
                    pool,
                    results,
                    model=args.model,
                    concurrency=args.concurrency,
                    keep_messages=not args.no_messages,
                    errors=(LLMUnavailable,),
                    progress=not args.quiet,
                )
        finally:
            await client.aclose()

    counts = run_async(main())
    print(
        f"ran {counts['run']} entries ({counts['errors']} errors), {counts['skipped']} already scored", file=sys.stderr
    )
    _report(results, args.categories, args.model)
    return 1 if counts["errors"] else 0


# -- bfcl-export ---------------------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    from env_registry.families.bfcl import build

    tokenizer = None
    if args.tokenizer:
        from transformers import AutoTokenizer  # lazy: heavy, only --tokenizer needs it

        tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    out = build(
        args.out, args.categories, ids=_ids(args), tokenizer=tokenizer, max_prompt_length=args.max_prompt_length
    )
    manifest = json.loads((out / "manifest.json").read_text())
    print(json.dumps(manifest, indent=2))
    print(f"verl: python -m verl.trainer.main_ppo +recipe=astra_bfcl_eval astra.bfcl_dir={out.resolve()} ...")
    return 0


# -- bfcl-score ----------------------------------------------------------------------------------


def cmd_score(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from astra_foundation.sandbox import SandboxPool
    from astra_verl.benchmarks import bfcl_hook  # noqa: F401  - registers the hook
    from astra_verl.benchmarks.bfcl_score import score_episode
    from astra_verl.calls.call_log import EpisodeLog
    from astra_verl.eval.bfcl_run import prepare, results_file

    if not Path(args.results).is_file():
        raise UsageError(f"{args.results}: no such file; pass the results.jsonl a `bfcl` run wrote (in its --out)")
    results = results_file(args.results, option="RESULTS argument")
    scored = [r for r in results.records.values() if r.status == "scored"]
    if not scored:
        raise UsageError(f"{args.results}: no scored episodes to re-score")
    models = sorted({r.model for r in scored})
    if args.output_file and len(models) > 1:  # written before one file held one run
        raise UsageError(
            f"{args.results} holds results of several models ({', '.join(models)}); --output-file holds one "
            "model's: split the file by model first, or re-score without --output-file"
        )
    # the re-scored file is one run's too: a file of another model's is refused before the sandbox starts
    out = results_file(args.output_file, models[0], option="--output-file") if args.output_file else None
    store = Path(args.store) if args.store else Path(args.results).parent / "store"
    data = prepare(store, sorted({r.category for r in scored}, key=CATEGORIES.index), ids=[r.id for r in scored])
    targets = {t.id: t for t in data.targets}
    changed = 0

    async def main() -> None:
        nonlocal changed
        async with SandboxPool(sandbox_config(args, 8)) as pool:
            for record in tqdm(scored, desc="re-score", unit="entry", disable=args.quiet):
                log = EpisodeLog.from_dict(record.episode or {})
                verdict = await score_episode(pool, targets[record.id], log)
                changed += verdict.valid != record.valid
                results.records[record.id] = record.model_copy(
                    update={"valid": verdict.valid, "verdict": verdict.to_dict()}
                )

    run_async(main())
    print(f"re-scored {len(scored)} episodes; {changed} verdicts changed", file=sys.stderr)
    if out is not None:
        for record in results.records.values():
            out.append(record)
    _report(results, [c for c in CATEGORIES if any(r.category == c for r in scored)], ",".join(models))
    return 0


# -- bfcl-replay ---------------------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace) -> int:
    from astra_verl.eval import bfcl_replay

    if args.via == "agent-loop" and not args.model_path:
        raise UsageError("bfcl-replay --via agent-loop needs --model-path DIR (a tokenizer + model directory)")
    out = Path(args.out) / ("wrong" if args.wrong else "ground_truth") / args.via.replace("-", "_")
    summary = bfcl_replay.run_replay(
        out,
        args.categories,
        ids=_ids(args),
        limit=args.limit,
        wrong=args.wrong,
        via=args.via,
        model_dir=args.model_path,
        overrides=args.set,
        concurrency=args.concurrency,
        sandbox=sandbox_config(args, args.concurrency),
        observations=not (args.no_observations or args.wrong),
    )
    _report(summary.results, args.categories, "ground truth" + (" (wrong)" if args.wrong else ""))
    if summary.observations is not None:
        compared, mismatches = summary.observations
        print(f"observations vs BFCL's executor: {compared - len(mismatches)}/{compared} calls identical")
        for m in mismatches[:20]:
            print("  mismatch:", m)
    return 0


# -- envs ------------------------------------------------------------------------------------


def _check_envs_inputs(args: argparse.Namespace) -> None:
    """A typo in either path would otherwise end in a traceback, --model-path after a minute of
    transformers trying the Hugging Face hub for a repository of that name."""
    if not Path(args.data).is_file():
        raise UsageError(
            f"--data {args.data}: no such file; pass an `env_registry export-parquet` file "
            "(e.g. runs/envs/mix_none/val.parquet)"
        )
    if not Path(args.model_path).is_dir():
        raise UsageError(
            f"--model-path {args.model_path}: not a directory; pass a local Hugging Face checkpoint folder "
            "(nothing is downloaded)"
        )


def cmd_envs(args: argparse.Namespace) -> int:
    from astra_foundation.strict import SettingsError
    from astra_verl.eval import envs_report
    from astra_verl.eval.envs import (
        EnvEvalConfig,
        EnvEvalError,
        EnvEvaluation,
        check_user,
        checkpoint_name,
        write_manifest,
    )

    _check_envs_inputs(args)
    out = args.out or Path("runs") / "eval_envs" / f"{checkpoint_name(args.model_path)}_{Path(args.data).stem}"
    try:
        cfg = EnvEvalConfig(
            data=Path(args.data),
            model_path=args.model_path,
            base_url=args.base_url,
            model=args.model,
            api_key_env=args.api_key_env,
            timeout_s=args.timeout,
            out=Path(out),
            recipe=args.recipe,
            overrides=args.set,
            temperature=args.temperature,
            top_p=args.top_p,
            n=args.n,
            concurrency=args.concurrency,
            limit=args.limit,
            seed=args.seed,
            label=args.label,
            user_base_url=args.user_base_url,
            user_model=args.user_model,
        )
        check_user(cfg)  # an unreachable user fails here, before the checkpoint loads
        t0 = time.perf_counter()
        evaluation = EnvEvaluation(cfg, progress=not args.quiet)
    except (SettingsError, EnvEvalError) as exc:
        raise UsageError(f"eval envs: {exc}") from None
    print(
        f"eval envs: {len(evaluation.rows)} rows x {cfg.n}, sampling {evaluation.params}, user {cfg.user_name}; "
        f"run dir {cfg.out}",
        file=sys.stderr,
    )
    evaluation.run()
    records = evaluation.records()
    summary = envs_report.summarize(records)
    title = f"{cfg.name} on {cfg.data.name} ({len(records)} episodes, T={evaluation.params['temperature']})"
    table = envs_report.format_table(summary, title)
    (cfg.out / "table.txt").write_text(table + "\n")
    print(table)
    print(
        f"plot: {envs_report.plot(summary, title, cfg.out / 'envs.png')}; manifest: {write_manifest(cfg, evaluation, time.perf_counter() - t0)}"
    )
    return 0


COMMANDS = {
    "envs": cmd_envs,
    "bfcl": cmd_bfcl,
    "bfcl-export": cmd_export,
    "bfcl-score": cmd_score,
    "bfcl-replay": cmd_replay,
    "bfcl-single": lambda args: bfcl_single_cli.cmd_single(args),
    "tau": tau_cli.cmd_tau,
    "tau-export": tau_cli.cmd_export,
    "tau-report": tau_cli.cmd_report,
}


def _saved(args: argparse.Namespace) -> str | None:
    """What a resumable command keeps when interrupted (its results file; a rerun runs only the
    rest), None for a command that starts again."""
    if args.command == "bfcl-single":
        return f"scored entries are saved in {bfcl_single_cli.run_dir(args) / 'results.jsonl'}"
    if args.command == "bfcl":
        return f"scored entries are saved in {run_dir(args) / 'results.jsonl'}"
    if args.command in ("envs", "tau"):  # their run directory's default needs the checkpoint's name
        where = f"{args.out}/results.jsonl" if args.out else "the run directory's results.jsonl"
        return f"scored episodes are saved in {where}"
    return None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    saved = _saved(args)
    return run_cli(lambda: _run(args), resumes=saved is not None, saved=saved or "")


def _run(args: argparse.Namespace) -> int:
    """The command, its start-up imports inside `run_cli` (Ctrl-C there is one line, exit 130)."""
    return COMMANDS[args.command](args)
