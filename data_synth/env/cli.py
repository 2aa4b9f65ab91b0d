"""`python -m data_synth env <step> --out DIR ...`: environment synthesis (docs/method.md §2).

Steps (each resumable: rerun the same command after a crash and it continues):
  decompose  seeds (--mode, --input) -> QA instances with decomposition traces
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
  python -m data_synth env run --out /tmp/dry --mode domain --sample --limit 8 \\
      --responder data_synth.env.canned:respond --percentile 0 --allow-scripted

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
import json
import os
import sys
import time
from pathlib import Path

from astra_foundation.clikit import EXIT_FAILED, EXIT_OK, UsageError, run_async, run_cli
from astra_foundation.llm import add_llm_arguments
from data_synth.env.report import STEPS
from data_synth.pipeline.run_options import add_run_arguments

PIPELINE = "env"
# The step files each command writes, in pipeline order (`verify` also runs `select`).
COMMAND_STEPS = {
    "decompose": ["env.decompose"],
    "necessity": ["env.necessity"],
    "verify": ["env.verify", "env.select"],
    "tools": ["env.tools"],
    "merge": ["env.merge"],
    "publish": ["env.publish"],
    "run": STEPS,
}
LLM_COMMANDS = {"decompose", "necessity", "verify", "tools", "merge", "run"}


def _load() -> None:
    """The pipeline's modules (sandbox, matching, stores, Ray: over a second of imports), bound in this
    module when a command runs, so `--help` answers at once (tests/test_cli_help.py). Idempotent."""
    global SandboxConfig, EnvContextFactory, Decompose, MergeTools, LabelNecessity, Publish, export_parquet, QA, Labeled, Merged, Published, Scored, Seed, Selected, Tooled, env_funnel, write_env_report, SeedError, load_seeds, parse_hops, sample_input, SynthesizeTools, Select, Verify, quality_threshold, LLMConfig, LLMSettingsError, preflight, RunStats, Shard, Step, StepContext, RunDirError, StoreError, read_outputs, run_chain, run_step, ManifestError, file_digest, read_manifest, run_step_ray, prepare_run_dir, EnvStore  # noqa: PLW0603
    from astra_foundation.llm import LLMConfig, LLMSettingsError, preflight
    from astra_foundation.sandbox import SandboxConfig
    from data_synth.env.context import EnvContextFactory
    from data_synth.env.decompose import Decompose
    from data_synth.env.merge import MergeTools
    from data_synth.env.necessity import LabelNecessity
    from data_synth.env.publish import Publish, export_parquet
    from data_synth.env.records import QA, Labeled, Merged, Published, Scored, Seed, Selected, Tooled
    from data_synth.env.report import env_funnel, write_env_report
    from data_synth.env.seeds import SeedError, load_seeds, parse_hops, sample_input
    from data_synth.env.tools import SynthesizeTools
    from data_synth.env.verify import Select, Verify, quality_threshold
    from data_synth.pipeline import RunDirError, RunStats, Shard, Step, StepContext, read_outputs, run_chain, run_step
    from data_synth.pipeline.manifest import ManifestError, file_digest, read_manifest
    from data_synth.pipeline.ray_runner import run_step_ray
    from data_synth.pipeline.run_options import prepare_run_dir
    from env_registry.store import EnvStore, StoreError


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out", dest="run_dir", required=True, type=Path, help="where every step reads and writes (resumable)"
    )
    p.add_argument("--concurrency", type=int, default=64, help="records in flight per step (default 64)")
    add_run_arguments(p)
    g = p.add_argument_group("sandbox")
    g.add_argument("--sandbox-workers", type=int, default=None, help="warm sandbox workers (default min(4, CPUs))")
    g.add_argument("--sandbox-call-timeout", type=float, default=5.0, help="seconds per tool call (default 5)")
    add_llm_arguments(p)


def _decompose_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("decompose")
    g.add_argument("--mode", choices=["domain", "context", "question", "taxonomy"], help="input kind")
    source = g.add_mutually_exclusive_group()
    source.add_argument("--input", type=Path, help="domains/context/questions .jsonl or a taxonomy .json")
    source.add_argument(
        "--sample",
        action="store_true",
        help="the bundled sample input of --mode (a few records of our own in ASTRA's format: dry runs, tests)",
    )
    g.add_argument("--samples", type=int, default=1, help="tasks drawn per input (default 1)")
    g.add_argument(
        "--hops",
        default=None,
        metavar="MIN..MAX",
        help="sub-questions per task (default 3..5 for context, 1..6 otherwise)",
    )
    g.add_argument("--language", default="en", help="language of the tasks (default en)")
    g.add_argument("--limit", type=int, default=None, help="use the first N inputs (after --offset)")
    g.add_argument("--offset", type=int, default=0, help="skip the first N inputs")


def _judge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judge-temperature", type=float, default=0.0, help="temperature of labels and judges (default 0)")


def _verify_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("verify")
    g.add_argument(
        "--percentile",
        type=float,
        default=90.0,
        help="keep instances with quality >= this percentile of the run's scores (default 90, ASTRA's "
        "README; its scripts use an absolute 0.85: --percentile 0 --min-quality 0.85)",
    )
    g.add_argument("--min-quality", type=float, default=0.0, help="absolute floor of the threshold (default 0)")


def _tools_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("tools")
    g.add_argument("--inner-retries", type=int, default=5, help="implementation tries per design (default 5)")
    g.add_argument("--outer-retries", type=int, default=15, help="designs per sub-question (default 15)")
    g.add_argument("--no-complexity-scaling", action="store_true", help="skip the schema-scaling stage")
    g.add_argument(
        "--allow-ungrounded-values", action="store_true", help="accept call values that appear nowhere in the request"
    )


def _merge_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--merge-retries", type=int, default=20, help="tries per cluster merge (default 20)")


def _publish_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("publish")
    g.add_argument("--store", type=Path, default=None, help="env_registry store (default RUN_DIR/envs)")
    g.add_argument("--val-fraction", type=float, default=0.1, help="validation share of the export (default 0.1)")
    g.add_argument("--no-export", action="store_true", help="do not write parquet")
    g.add_argument(
        "--allow-scripted",
        action="store_true",
        help="also store environments made by a dry run (--responder/--scripted answered, not a model)",
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m data_synth env", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="STEP")
    specs = {
        "decompose": ("seeds -> QA with decomposition traces", [_decompose_args]),
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
    rp.add_argument("--out", dest="run_dir", required=True, type=Path)
    return p


def _save_seeds(run_dir: Path, seeds: list[Seed]) -> None:
    path = run_dir / "seeds.jsonl"
    known: dict[str, str] = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                known[json.loads(line)["key"]] = line
    for s in seeds:
        known.setdefault(s.key, s.model_dump_json())
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(line + "\n" for line in known.values()), encoding="utf-8")
    os.replace(tmp, path)


class EnvRun:
    """One invocation: the steps asked for, sharing one local context (LLM client + sandbox)."""

    def __init__(self, args: argparse.Namespace):
        _load()
        self.args = args
        self.run_dir: Path = args.run_dir
        try:
            self.shard = Shard.parse(args.shard)
        except ValueError as e:
            raise UsageError(f"--shard: {e}") from None
        sandbox_kw = {"call_timeout_s": args.sandbox_call_timeout}
        if args.sandbox_workers:
            sandbox_kw["workers"] = args.sandbox_workers
        self.factory = EnvContextFactory(
            llm=LLMConfig.from_args(args),
            cache_path=str(self.run_dir / "llm_cache.sqlite"),
            sandbox=SandboxConfig(**sandbox_kw),
        )
        self._ctx: StepContext | None = None
        self.timings: dict[str, float] = {}  # seconds per phase of `synthesize`
        self.stats: list[RunStats] = []  # what each step did in this invocation
        self.input_problems: list[str] = []  # input lines rejected by load_seeds
        self._seeds: list[Seed] | None = None
        self.published: int | None = None  # environments of this run in the store (after publish)

    async def _local_ctx(self) -> StepContext:
        if self._ctx is None:
            self._ctx = await self.factory()
        return self._ctx

    def _report(self, stats: RunStats) -> None:
        self.stats.append(stats)
        print(stats.line(), flush=True)

    async def stage(self, step: Step, inputs: list, *, local: bool = False) -> None:
        args = self.args
        if args.ray and not local:
            stats = await run_step_ray(
                step,
                inputs,
                self.run_dir,
                context_factory=self.factory,
                workers=args.ray_workers,
                concurrency_per_worker=args.concurrency,
                shard=self.shard,
                progress=not args.quiet,
            )
        else:
            stats = await run_step(
                step,
                inputs,
                self.run_dir,
                ctx=await self._local_ctx(),
                concurrency=args.concurrency,
                shard=self.shard,
                progress=not args.quiet,
            )
        self._report(stats)

    async def chain(self, steps: list[Step], inputs: list) -> None:
        """Steps back to back per record (`run_chain`); on Ray, one step after the other."""
        if self.args.ray:
            for i, step in enumerate(steps):
                step_inputs = read_outputs(self.run_dir, steps[i - 1].name, step.input_type) if i else inputs
                await self.stage(step, step_inputs)
            return
        for stats in await run_chain(
            steps,
            inputs,
            self.run_dir,
            ctx=await self._local_ctx(),
            concurrency=self.args.concurrency,
            shard=self.shard,
            progress=not self.args.quiet,
        ):
            self._report(stats)

    def load_inputs(self) -> list[Seed]:
        """The seeds of --input (read once; raises SeedError when there are none)."""
        if self._seeds is not None:
            return self._seeds
        a = self.args
        self._seeds = load_seeds(
            a.mode,
            a.input,
            samples=a.samples,
            hops=parse_hops(a.hops),
            language=a.language,
            limit=a.limit,
            offset=a.offset,
            problems=self.input_problems,
        )
        return self._seeds

    def seeds(self) -> list[Seed]:
        a = self.args
        seeds = self.load_inputs()
        _save_seeds(self.run_dir, seeds)
        print(
            f"{len(seeds)} seeds from {a.input} ({a.mode} mode{', bundled sample' if getattr(a, 'sample', False) else ''})",
            flush=True,
        )
        for problem in self.input_problems[:10]:
            print(f"rejected input line {problem}", flush=True)
        if len(self.input_problems) > 10:
            print(f"... and {len(self.input_problems) - 10} more rejected input lines", flush=True)
        return seeds

    async def decompose(self) -> None:
        await self.stage(Decompose(), self.seeds())

    async def necessity(self) -> None:
        await self.stage(LabelNecessity(self.args.judge_temperature), read_outputs(self.run_dir, "env.decompose", QA))

    async def verify(self) -> None:
        await self.stage(Verify(self.args.judge_temperature), read_outputs(self.run_dir, "env.necessity", Labeled))
        await self.select()

    async def select(self) -> None:
        a = self.args
        scored = read_outputs(self.run_dir, "env.verify", Scored)
        threshold = quality_threshold([s.quality for s in scored], percentile=a.percentile, min_quality=a.min_quality)
        print(f"quality threshold {threshold:.3f} (P{a.percentile:g} of {len(scored)} scores, floor {a.min_quality})")
        await self.stage(Select(threshold, len(scored), a.percentile), scored, local=True)

    def tools_step(self) -> SynthesizeTools:
        a = self.args
        return SynthesizeTools(
            inner_retries=a.inner_retries,
            outer_retries=a.outer_retries,
            complexity_scaling=not a.no_complexity_scaling,
            require_grounded_values=not a.allow_ungrounded_values,
        )

    async def tools(self) -> None:
        await self.stage(self.tools_step(), read_outputs(self.run_dir, "env.select", Selected))

    async def merge(self) -> None:
        await self.stage(MergeTools(self.args.merge_retries), read_outputs(self.run_dir, "env.tools", Tooled))

    async def synthesize(self) -> None:
        """Every step up to merge, as `run` does them: decompose > necessity > verify streamed
        per record, the select barrier (the percentile needs every score), tools > merge streamed."""
        a = self.args
        t0 = time.perf_counter()
        await self.chain([Decompose(), LabelNecessity(a.judge_temperature), Verify(a.judge_temperature)], self.seeds())
        t1 = time.perf_counter()
        await self.select()
        selected = read_outputs(self.run_dir, "env.select", Selected)
        t2 = time.perf_counter()
        await self.chain([self.tools_step(), MergeTools(a.merge_retries)], selected)
        self.timings = {"qa_chain": t1 - t0, "select": t2 - t1, "tool_chain": time.perf_counter() - t2}

    async def publish(self) -> None:
        a = self.args
        if self.shard.count > 1:
            print(
                f"shard {self.shard}: skipping publish; run `python -m data_synth env publish --out "
                f"{self.run_dir}` once all shards have finished",
                flush=True,
            )
            return
        store_path = a.store or self.run_dir / "envs"
        merged = read_outputs(self.run_dir, "env.merge", Merged)
        scripted = sorted({s for r in merged if (s := (r.env.get("provenance") or {}).get("scripted"))})
        if scripted and not a.allow_scripted:
            raise UsageError(
                f"publish: environments of this run were made by a dry run ({', '.join(scripted)} answered, not a "
                f"model); they go into {store_path} only when asked: `python -m data_synth env publish --out "
                f"{self.run_dir} --allow-scripted`"
            )
        with EnvStore.open(store_path, "a", allow_scripted=a.allow_scripted) as store:
            stats = await run_step(
                Publish(),
                merged,
                self.run_dir,
                ctx=StepContext(extra={"store": store}),
                progress=not a.quiet,
            )
            self._report(stats)
            ids = sorted({p.env_id for p in read_outputs(self.run_dir, "env.publish", Published)})
            self.published = len(ids)
            print(f"store {store_path}: {len(store)} environments ({len(ids)} from this run)", flush=True)
            if not a.no_export and ids:
                folder = export_parquet(store, ids, self.run_dir / "parquet", val_fraction=a.val_fraction)
                print(f"parquet: {folder}/train.parquet, {folder}/val.parquet", flush=True)

    async def run(self, steps: list[str]) -> None:
        try:
            if self.args.ray and not _ray_ready(self.args.ray):
                raise UsageError(f"--ray {self.args.ray}: could not start or reach Ray")
            for name in steps:
                await getattr(self, name)()
        finally:
            if self._ctx is not None:
                await self._ctx.aclose()

    def failures(self) -> list[str]:
        """Why this invocation did not fully succeed (empty when it did)."""
        out = []
        errors = sum(s.error for s in self.stats)
        if errors:
            out.append(f"{errors} records errored (first error printed above); rerun the same command to retry them")
        if self.input_problems:
            out.append(f"{len(self.input_problems)} input lines were rejected (listed above); fix them and rerun")
        if self.args.command == "run" and self.published == 0:
            out.append("the run produced no environment; the funnel above shows where the records fell out")
        return out


def step_settings(args: argparse.Namespace) -> dict[str, dict]:
    """What decides each step's records (see data_synth.pipeline.manifest), for this command's steps."""
    model = {"llm_model": args.model or args.responder or args.scripted or ""}
    judge = {**model, "judge_temperature": getattr(args, "judge_temperature", None)}
    every = {
        "env.decompose": lambda: {
            **model,
            "mode": args.mode,
            "input": str(Path(args.input).resolve()),
            "input_digest": file_digest(args.input),
            "samples": args.samples,
            "hops": args.hops,
            "language": args.language,
        },
        "env.necessity": lambda: judge,
        "env.verify": lambda: judge,
        "env.select": lambda: {"percentile": args.percentile, "min_quality": args.min_quality},
        "env.tools": lambda: {
            **model,
            "inner_retries": args.inner_retries,
            "outer_retries": args.outer_retries,
            "complexity_scaling": not args.no_complexity_scaling,
            "require_grounded_values": not args.allow_ungrounded_values,
            "call_timeout_s": args.sandbox_call_timeout,
        },
        "env.merge": lambda: {**model, "merge_retries": args.merge_retries},
        "env.publish": lambda: {"store": str(Path(args.store or args.run_dir / "envs").resolve())},
    }
    return {step: every[step]() for step in COMMAND_STEPS[args.command]}


def _ray_ready(address: str) -> bool:
    import ray  # lazy: heavy, only the Ray runner needs it

    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, log_to_driver=False)
    return ray.is_initialized()


def check_run_dir(args: argparse.Namespace) -> None:
    """Refuse a command its run directory cannot serve, before anything is written."""
    run_dir: Path = args.run_dir
    creates = args.command in ("decompose", "run")
    if not run_dir.is_dir() and (run_dir.exists() or not creates):
        what = "is not a directory" if run_dir.exists() else "does not exist"
        raise UsageError(f"--out {run_dir} {what}; run `decompose` (or `run`) into it first")
    if run_dir.is_dir():
        read_manifest(run_dir, PIPELINE)  # a traj run directory is refused before anything is written
    if creates and getattr(args, "sample", False) and args.mode:
        args.input = sample_input(args.mode, args.language)  # the bundled sample, named like any input
    if creates and (not args.mode or not args.input):
        raise UsageError(f"{args.command} needs --mode and --input FILE (or --sample: the bundled sample input)")


def refuse_an_unpublishable_dry_run(args: argparse.Namespace, llm: LLMConfig) -> None:
    """`run` answered by a responder or rules makes scripted environments, which a store takes only
    with --allow-scripted: say so before the run, not after every step has run."""
    scripted = llm.responder or llm.scripted
    if args.command == "run" and scripted and not args.allow_scripted and Shard.parse(args.shard).count == 1:
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
    check_run_dir(args)
    run = EnvRun(args)
    if args.command in ("decompose", "run"):
        run.load_inputs()  # a bad input is refused before the run directory records it
    if args.command in LLM_COMMANDS:
        llm = LLMConfig.from_args(args)
        preflight(llm)
        refuse_an_unpublishable_dry_run(args, llm)
    prepare_run_dir(args, PIPELINE, STEPS, COMMAND_STEPS[args.command], step_settings(args))
    steps = ["synthesize", "publish"] if args.command == "run" else [args.command]
    run_async(run.run(steps))
    funnel = env_funnel(args.run_dir)
    funnel.save(args.run_dir / "funnel.json")
    print("\n" + funnel.table())
    if args.command == "run" and run.shard.count == 1:
        print(f"\nreport: {write_env_report(args.run_dir)}")
    failures = run.failures()
    for line in failures:
        print(f"error: {line}", file=sys.stderr, flush=True)
    return EXIT_FAILED if failures else EXIT_OK


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(
        lambda: _loaded_command(args),
        interrupted="finished records are saved; rerun the same command to continue",
    )


def _loaded_command(args: argparse.Namespace) -> int:
    """The command after `_load`, both inside `run_cli` (Ctrl-C during the imports: one line, exit 130)."""
    _load()
    try:
        return _command(args)
    except (SeedError, LLMSettingsError, ManifestError, RunDirError, StoreError) as exc:  # PreflightError is one
        raise UsageError(str(exc)) from exc
