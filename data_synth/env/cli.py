"""`python -m data_synth env <step> --out DIR ...`: environment synthesis (docs/method.md §2).

Steps (each resumable: rerun the same command after a crash and it continues):
  decompose  input records (--mode, --input) -> QA instances with decomposition traces
  necessity  label each sub-question's tool necessity; drop illegitimate instances
  verify     four LLM judges -> quality; keep instances at or above the run's percentile
  tools      per tool-needing sub-question: schema, scaling, call, implementation, sandbox check
  merge      cluster same-intent tools, merge their mock data, re-run every golden call
  publish    add the environments to an env_registry store; export train/val parquet
  report     funnel + plots (report/report.md)
  run        all of the above, in order

Examples:
  # against a pool of `vllm serve` replicas
  python -m data_synth env run --out runs/ctx --mode context \\
      --input astra/env_synthesis/data/en/context.jsonl --limit 100 \\
      --base-url http://10.0.0.1:8000/v1,http://10.0.0.2:8000/v1 --model Qwen3-32B
  # a dry run of the whole pipeline without a model (canned, valid replies; their provenance
  # says scripted, and only --allow-scripted lets them into a store)
  python -m data_synth env run --out /tmp/dry --mode domain --bundled-input --limit 8 \\
      --responder data_synth.env.canned:respond --percentile 0 --allow-scripted

Settings: --config FILE (YAML, sections as in data_synth/env/config.py), then --set
SECTION.KEY=VALUE (a YAML value; repeatable); a flag given on the command line wins over both.
Run directory: manifest.json (each step's settings and input digests: a rerun with other
settings is refused unless --force), seeds.jsonl, env.<step>[.shard-I-of-N].jsonl (one envelope
per record: ok / rejected with reason / error), llm_cache.sqlite, envs/ (the store), parquet/,
funnel.json, report/report.md with report/plots/. Sharded runs (--shard I/N) split every step by
record key; run `publish` once, unsharded, after all shards finished. With --ray the LLM steps
run on a Ray cluster. --redo starts a step (and every later one) afresh; --retry-rejected runs a
step's rejected records again; the old records move to RUN_DIR/redo-<time>/.

Before the first record every LLM endpoint is checked (reachable, model served). Exit status:
0 done; 1 some record errored (the first error is printed; rerun to retry), an input line was
rejected, or `run` produced no environment; 2 the command could not start; 130 interrupted.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from astra_foundation.clikit import EXIT_OK, UsageError, refuse_renamed, run_async, run_cli
from astra_foundation.llm import add_llm_arguments
from data_synth.pipeline.run_options import add_run_arguments, add_run_dir_argument, add_settings_arguments

PIPELINE = "env"
LLM_COMMANDS = {"decompose", "necessity", "verify", "tools", "merge", "run"}
# Flag -> (section, key) of the settings (data_synth/env/config.py); a flag left out keeps the
# value of --config, else the default. The `--no-...`/`--allow-...` switches turn a setting off.
FLAG_SETTINGS: dict[str, tuple[str, str]] = {
    "mode": ("inputs", "mode"),
    "input": ("inputs", "input"),
    "samples": ("inputs", "samples"),
    "hops": ("inputs", "hops"),
    "language": ("inputs", "language"),
    "limit": ("inputs", "limit"),
    "offset": ("inputs", "offset"),
    "judge_temperature": ("judge", "temperature"),
    "percentile": ("verify", "percentile"),
    "min_quality": ("verify", "min_quality"),
    "inner_retries": ("tools", "inner_retries"),
    "outer_retries": ("tools", "outer_retries"),
    "merge_retries": ("merge", "retries"),
    "store": ("publish", "store"),
    "val_fraction": ("publish", "val_fraction"),
    "allow_scripted": ("publish", "allow_scripted"),
    "sandbox_workers": ("sandbox", "workers"),
    "call_timeout": ("sandbox", "call_timeout_s"),
}
SWITCHES_OFF = {
    "no_complexity_scaling": ("tools", "complexity_scaling"),
    "allow_ungrounded_values": ("tools", "require_grounded_values"),
    "no_export": ("publish", "export"),
}


def _load() -> None:
    """The pipeline's modules (sandbox, matching, stores, Ray: over a second of imports), bound in this
    module when a command runs, so `--help` answers at once (tests/test_cli_help.py). Idempotent."""
    global LLMConfig, LLMSettingsError, preflight, SettingsError, EnvConfig, SeedError, sample_input, env_funnel, write_env_report, STEPS, Shard, RunDirError, ManifestError, read_manifest, check_run_dir, exit_status, prepare_run_dir, COMMAND_STEPS, EnvRun, context_factory, StoreError  # noqa: PLW0603
    from astra_foundation.llm import LLMConfig, LLMSettingsError, preflight
    from astra_foundation.strict import SettingsError
    from data_synth.env.config import EnvConfig
    from data_synth.env.report import STEPS, env_funnel, write_env_report
    from data_synth.env.run import COMMAND_STEPS, EnvRun, context_factory
    from data_synth.env.seeds import SeedError, sample_input
    from data_synth.pipeline import RunDirError, Shard
    from data_synth.pipeline.manifest import ManifestError, read_manifest
    from data_synth.pipeline.run_options import check_run_dir, exit_status, prepare_run_dir
    from env_registry.store import StoreError


def _common(p: argparse.ArgumentParser) -> None:
    add_run_dir_argument(p)
    add_settings_arguments(p, "data_synth/env/config.py")
    p.add_argument("--concurrency", type=int, help="records in flight per step (default 64)")
    add_run_arguments(p)
    g = p.add_argument_group("sandbox")
    g.add_argument("--sandbox-workers", type=int, default=None, help="warm sandbox workers (default min(4, CPUs))")
    g.add_argument("--call-timeout", type=float, help="seconds per tool call in the sandbox (default 5)")
    refuse_renamed(p, "--sandbox-call-timeout", "--call-timeout", "one name for the sandbox's per-call limit")
    add_llm_arguments(p, shared=("concurrency",))  # records in flight cap the client's requests


def _decompose_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decompose")
    g.add_argument("--mode", choices=["domain", "context", "question", "taxonomy"], help="input kind")
    source = g.add_mutually_exclusive_group()
    source.add_argument("--input", type=Path, help="domains/context/questions .jsonl or a taxonomy .json")
    source.add_argument(
        "--bundled-input",
        action="store_true",
        help="the bundled sample input of --mode (a few records of our own in ASTRA's format: dry runs, tests)",
    )
    # `--sample N` is a seeded random sample of N elsewhere (eval bfcl-single)
    refuse_renamed(p, "--sample", "--bundled-input", "--sample N draws N entries in every command line")
    g.add_argument("--samples", type=int, help="tasks drawn per input (default 1)")
    g.add_argument(
        "--hops",
        metavar="MIN..MAX",
        help="sub-questions per task (default 3..5 for context, 1..6 otherwise)",
    )
    g.add_argument("--language", help="language of the tasks (default en)")
    g.add_argument("--limit", type=int, help="use the first N inputs (after --offset)")
    g.add_argument("--offset", type=int, help="skip the first N inputs")


def _judge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judge-temperature", type=float, help="temperature of labels and judges (default 0)")


def _verify_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("verify")
    g.add_argument(
        "--percentile",
        type=float,
        help="keep instances with quality >= this percentile of the run's scores (default 90, ASTRA's "
        "README; its scripts use an absolute 0.85: --percentile 0 --min-quality 0.85)",
    )
    g.add_argument("--min-quality", type=float, help="absolute floor of the threshold (default 0)")


def _tools_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("tools")
    g.add_argument("--inner-retries", type=int, help="implementation tries per design (default 5)")
    g.add_argument("--outer-retries", type=int, help="designs per sub-question (default 15)")
    g.add_argument("--no-complexity-scaling", action="store_true", default=None, help="skip the schema-scaling stage")
    g.add_argument(
        "--allow-ungrounded-values",
        action="store_true",
        default=None,
        help="accept call values that appear nowhere in the request",
    )


def _merge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--merge-retries", type=int, help="tries per cluster merge (default 20)")


def _publish_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("publish")
    g.add_argument("--store", type=Path, help="env_registry store (default RUN_DIR/envs)")
    g.add_argument("--val-fraction", type=float, help="validation share of the export (default 0.1)")
    g.add_argument("--no-export", action="store_true", default=None, help="do not write parquet")
    g.add_argument(
        "--allow-scripted",
        action="store_true",
        default=None,
        help="also store environments made by a dry run (--responder/--scripted answered, not a model)",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m data_synth env", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="STEP")
    specs = {
        "decompose": ("input records -> QA with decomposition traces", [_decompose_args]),
        "necessity": ("tool-necessity labels and legitimacy", [_judge_args]),
        "verify": ("four-way verification and the percentile threshold", [_judge_args, _verify_args]),
        "tools": ("tool synthesis with sandbox checks", [_tools_args]),
        "merge": ("intent clustering, merging, golden-call replay", [_merge_args]),
        "publish": ("store the environments and export parquet", [_publish_args]),
        "run": (
            "every step in order, then the report",
            [_decompose_args, _judge_args, _verify_args, _tools_args, _merge_args, _publish_args],
        ),
    }
    for name, (help_, groups) in specs.items():
        sp = sub.add_parser(name, help=help_, description=help_)
        _common(sp)
        for add in groups:
            add(sp)
    rp = sub.add_parser("report", help="funnel and plots of a run", description="funnel and plots of a run")
    add_run_dir_argument(rp, "the run to report on")
    return p


def load_settings(args: argparse.Namespace) -> EnvConfig:
    """--config, then --set, then every flag given on the command line."""
    _load()
    from data_synth.pipeline.settings import apply_sets

    raw: dict[str, Any] = apply_sets(EnvConfig.read_yaml(args.config), getattr(args, "set", []))
    given = {k: v for k, v in FLAG_SETTINGS.items() if getattr(args, k, None) is not None}
    given |= {k: v for k, v in SWITCHES_OFF.items() if getattr(args, k, None)}
    for dest, (section, key) in given.items():
        value = False if dest in SWITCHES_OFF else getattr(args, dest)
        raw[section] = {**(raw.get(section) or {}), key: str(value) if isinstance(value, Path) else value}
    if getattr(args, "concurrency", None) is not None:
        raw["concurrency"] = args.concurrency
    return EnvConfig.from_dict(raw)


def check_inputs(args: argparse.Namespace, cfg: EnvConfig) -> EnvConfig:
    """Refuse a command its run directory or inputs cannot serve, before anything is written; the
    settings with --bundled-input resolved to the bundled sample's path (named like any input)."""
    creates = args.command in ("decompose", "run")
    check_run_dir(args.run_dir, PIPELINE, creates=creates, first="decompose")  # also refuses a traj run's
    s = cfg.inputs
    if creates and getattr(args, "bundled_input", False) and s.mode:
        s = s.model_copy(update={"input": str(sample_input(s.mode, s.language))})
    if creates and (not s.mode or not s.input):
        raise UsageError(f"{args.command} needs --mode and --input FILE (or --bundled-input: the bundled sample input)")
    return cfg.model_copy(update={"inputs": s})


def make_run(args: argparse.Namespace, cfg: EnvConfig | None = None) -> EnvRun:
    """The run of a parsed command line (`cfg`: its settings, read from it when not given)."""
    _load()
    cfg = cfg or load_settings(args)
    # `concurrency` (records in flight, flag or file) also caps the client's requests
    llm = LLMConfig.from_args(args).model_copy(update={"max_concurrency": cfg.concurrency})
    try:
        shard = Shard.parse(args.shard)
    except ValueError as e:
        raise UsageError(f"--shard: {e}") from None
    return EnvRun(
        run_dir=args.run_dir,
        cfg=cfg,
        factory=context_factory(cfg, llm, args.run_dir),
        shard=shard,
        progress=not args.quiet,
        ray_workers=args.ray_workers if args.ray else 0,
        sample=bool(getattr(args, "bundled_input", False)),
    )


def _ray_ready(address: str) -> bool:
    import ray  # lazy: heavy, only the Ray runner needs it

    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, log_to_driver=False)
    return ray.is_initialized()


def refuse_an_unpublishable_dry_run(command: str, run: EnvRun) -> None:
    """`run` answered by a responder or rules makes scripted environments, which a store takes only
    with --allow-scripted: say so before the run, not after every step has run."""
    llm = run.factory.llm
    scripted = llm.responder or llm.scripted
    if command == "run" and scripted and not run.cfg.publish.allow_scripted and run.shard.count == 1:
        raise UsageError(
            f"a dry run ({scripted} answers, not a model) makes environments a store takes only when asked: "
            "add --allow-scripted (their provenance says scripted), or run the steps up to `merge` alone"
        )


def _report_command(args: argparse.Namespace) -> int:
    if not args.run_dir.is_dir():  # read-only: never create the directory it reports on
        raise UsageError(f"--out {args.run_dir} is not a run directory (it does not exist)")
    read_manifest(args.run_dir, PIPELINE)  # a traj run's report/ is not ours to overwrite
    path = write_env_report(args.run_dir)
    print(env_funnel(args.run_dir).table())
    print(f"\nreport: {path}")
    return EXIT_OK


def _command(args: argparse.Namespace) -> int:
    if args.command == "report":
        return _report_command(args)
    cfg = check_inputs(args, load_settings(args))
    run = make_run(args, cfg)
    if args.command in ("decompose", "run"):
        run.load_inputs()  # a bad input is refused before the run directory records it
    if args.command in LLM_COMMANDS:
        preflight(run.factory.llm)
        refuse_an_unpublishable_dry_run(args.command, run)
    prepare_run_dir(args, PIPELINE, STEPS, COMMAND_STEPS[args.command], run.manifest_settings(args.command))
    if args.ray and not _ray_ready(args.ray):
        raise UsageError(f"--ray {args.ray}: could not start or reach Ray")
    run_async(run.run(args.command))
    funnel = env_funnel(args.run_dir)
    funnel.save(args.run_dir / "funnel.json")
    print("\n" + funnel.table())
    if args.command == "run" and run.shard.count == 1:
        print(f"\nreport: {write_env_report(args.run_dir)}")
    return exit_status(run.problems(args.command))


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(
        lambda: _loaded_command(args),
        resumes=True,
        saved="finished records are saved",
    )


def _loaded_command(args: argparse.Namespace) -> int:
    """The command after `_load`, both inside `run_cli` (Ctrl-C during the imports: one line, exit 130)."""
    _load()
    try:
        return _command(args)
    except (SeedError, LLMSettingsError, ManifestError, RunDirError, StoreError) as exc:  # PreflightError is one
        raise UsageError(str(exc)) from exc
    except SettingsError as exc:
        raise UsageError(f"settings: {exc}") from exc
