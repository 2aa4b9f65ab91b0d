"""`python -m astra_verl.eval tau`: a policy on τ-bench's tasks, scored with τ-bench's reward.

The rows come from the `tau_bench` family (`env_registry.families.tau_rows.build`, written once
into `<out>/rows`); each episode is `astra_tool_agent` built as `eval envs` builds it (the
recipe's config, a local checkpoint served by `hf_cpu`, or an OpenAI-compatible endpoint), with
the `tau_user` hook (an LLM user over `--user-base-url/--user-model`, τ-bench's default user
strategy; or `--user scripted` for dry runs), scored by `astra_tau` (`tau_reward.score_episode`).

Results (`<out>/results.jsonl`, `tau_report.TauResult` lines) are resumable like `eval envs`': a
rerun runs only the (task, sample) pairs not scored yet; a file holds one policy on one domain and
split (another's is refused before the first episode). pass^k (τ-bench's): the mean over tasks of
C(c, k) / C(n, k), c the task's successes (reward 1) among its n samples, for k = 1..n.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from tqdm.auto import tqdm
from transformers import AutoConfig, AutoTokenizer
from verl.utils.ray_utils import get_event_loop

from astra_foundation.clikit import UsageError
from astra_foundation.strict import SettingsError, StrictModel
from astra_verl.benchmarks.tau_reward import parse_target, score_episode
from astra_verl.calls.call_log import EpisodeLog
from astra_verl.eval import tau_preflight, tau_report
from astra_verl.eval.envs import (
    EnvEvalConfig,
    checkpoint_name,
    endpoint_server,
    episode_kwargs,
    fan_out,
    load_rows,
    local_server,
    sampling_params,
    trainer_config,
)
from astra_verl.eval.results import ResultsFileError
from astra_verl.rollout.context import RolloutContext
from astra_verl.rollout.testing import make_loop
from env_registry.families import tau, tau_rows

RESULTS_VERSION = tau_report.RESULTS_VERSION


class TauEvalConfig(StrictModel):
    """One `eval tau` run."""

    section = "eval tau"

    domain: Literal["retail", "airline"]
    split: str = "test"
    out: Path
    model_path: str
    base_url: str | None = None
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    user: Literal["llm", "scripted"] = "llm"
    user_base_url: str = ""
    user_model: str = ""
    user_max_tokens: int | None = Field(default=None, ge=1)  # per user turn (None: the client's default)
    timeout_s: float = Field(default=120.0, gt=0)  # per request to the policy's endpoint (--timeout)
    user_timeout_s: float = Field(default=120.0, gt=0)  # per request to the user's endpoint (--user-timeout)
    recipe: str = "astra_cpu"
    overrides: list[str] = Field(default_factory=list)
    temperature: float | None = Field(default=None, ge=0)
    n: int = Field(default=1, ge=1)
    concurrency: int = Field(default=4, ge=1)
    limit: int | None = Field(default=None, ge=1)
    label: str = ""

    @model_validator(mode="after")
    def _consistent(self) -> TauEvalConfig:
        if self.user == "llm" and not (self.user_base_url and self.user_model):
            raise ValueError("the LLM user needs --user-base-url and --user-model (the user simulator's endpoint)")
        if self.n > 1 and not self.temperature:
            raise ValueError("--n > 1 needs --temperature > 0: greedy decoding repeats one episode")
        return self

    @property
    def name(self) -> str:
        return self.label or (self.model if self.base_url else checkpoint_name(self.model_path))


def tau_overrides() -> list[str]:
    """τ-bench's settings as Hydra overrides (the run's `--set`s come after and win): the
    `astra.sandbox` settings its tools need (`tau.SANDBOX`), and its episode limits (its
    `max_num_steps` default, 30 agent turns; the user, not a count, ends the conversation), which
    the CPU recipe's 4 assistant turns would otherwise cut short."""
    s = tau.SANDBOX
    return [
        "++actor_rollout_ref.rollout.multi_turn.max_assistant_turns=30",
        "++actor_rollout_ref.rollout.multi_turn.max_user_turns=null",
        f"++astra.sandbox.packages=[{','.join(s['packages'])}]",
        f"++astra.sandbox.preload=[{','.join(s['preload'])}]",
        f"++astra.sandbox.memory_mb={s['memory_mb']}",
        f"++astra.sandbox.max_output_chars={s['max_output_chars']}",
        f"++astra.sandbox.call_timeout_s={s['call_timeout_s']}",
    ]


def rows_path(cfg: TauEvalConfig, *, build: bool = True) -> Path:
    """The run's rows, built on first use (a resumed run reads them back)."""
    path = cfg.out / "rows" / f"{cfg.domain}_{cfg.split}.parquet"
    if build and not path.exists():
        user = tau_rows.UserConfig(
            user=cfg.user,
            base_url=cfg.user_base_url,
            model=cfg.user_model,
            max_tokens=cfg.user_max_tokens,
            timeout_s=cfg.user_timeout_s,
        )
        count = len(tau.load_tasks(cfg.domain, cfg.split))
        indices = range(min(count, cfg.limit or count))
        tau_rows.build(cfg.out / "rows", cfg.domain, cfg.split, user=user, indices=indices)
    return path


class TauEvaluation:
    """The episodes of one run: `run()` evaluates every (task, sample) not yet in the results file."""

    def __init__(self, cfg: TauEvalConfig, *, server: Any = None, progress: bool = True, preflight: bool = False):
        """`preflight`: check the endpoints and the domain's fit (`tau_preflight`) before building the rows."""
        self.cfg = cfg
        data = rows_path(cfg, build=False)
        env_cfg = EnvEvalConfig(
            data=data,
            out=cfg.out,
            model_path=cfg.model_path,
            base_url=cfg.base_url,
            model=cfg.model,
            api_key_env=cfg.api_key_env,
            timeout_s=cfg.timeout_s,
            recipe=cfg.recipe,
            overrides=[*tau_overrides(), *cfg.overrides],
            temperature=cfg.temperature,
            n=cfg.n,
            concurrency=cfg.concurrency,
        )
        self.env_cfg = env_cfg
        self.config = trainer_config(env_cfg)
        self.tokenizer = AutoTokenizer.from_pretrained(cfg.model_path)
        model_config = AutoConfig.from_pretrained(cfg.model_path)
        self.model_type = model_config.model_type
        self.prompt_tokens = tau_preflight.check(cfg, self.config, self.tokenizer, model_config) if preflight else None
        self.rows = load_rows(rows_path(cfg), cfg.limit)
        self.params = sampling_params(self.config, env_cfg)
        # another run's file is refused here, before the first episode
        self.results = tau_report.results_file(cfg.out / "results.jsonl", cfg.name, f"{cfg.domain}/{cfg.split}")
        self.server = server
        self.context = RolloutContext()
        self.progress = progress

    def todo(self) -> list[tuple[int, int]]:
        return [(i, k) for i in range(len(self.rows)) for k in range(self.cfg.n) if not self.results.done(f"{i}:{k}")]

    async def episode(self, i: int, k: int) -> dict[str, Any]:
        """One episode, scored: its `TauResult`, as the line the results file keeps."""
        if self.server is None:
            self.server = endpoint_server(self.env_cfg, self.config) if self.cfg.base_url else local_server(self.config)
        row = self.rows[i]
        t0 = time.perf_counter()
        loop = make_loop(self.config, self.server, self.tokenizer, hf_model_type=self.model_type, context=self.context)
        out = await loop.run(dict(self.params), **episode_kwargs(row))
        log = EpisodeLog.from_extra_fields(out.extra_fields)
        target = parse_target(row["reward_model"]["ground_truth"])
        scored = await score_episode(self.context.sandbox(), target, log)
        return tau_report.TauResult(
            id=f"{i}:{k}",
            task=target.task,
            sample=k,
            policy=self.cfg.name,
            reward=scored.reward,
            **scored.extra_info,
            ended_by=log.hook_state.get("ended_by", ""),
            terminated_by=log.terminated_by.value if log.terminated_by else "",
            elapsed_s=round(time.perf_counter() - t0, 3),
        ).model_dump()

    def run(self) -> list[tau_report.TauResult]:
        """Run what is left; any failure propagates after the finished episodes are written."""
        todo = self.todo()
        bar = tqdm(total=len(todo), desc=f"eval tau {self.cfg.domain}", unit="episode", disable=not self.progress)
        passed = {"reward": 0.0, "n": 0}

        def on_done(line: dict[str, Any]) -> None:
            record = tau_report.TauResult(**line)
            self.results.append(record)
            passed["reward"] += record.reward == 1.0
            passed["n"] += 1
            bar.update(1)
            bar.set_postfix(passed=f"{passed['reward']:.0f}/{passed['n']}")

        fan = fan_out(todo, self.episode, on_done, concurrency=self.cfg.concurrency, owner=self)
        try:
            get_event_loop().run_until_complete(fan)
        finally:
            bar.close()
        keys = {f"{i}:{k}" for i in range(len(self.rows)) for k in range(self.cfg.n)}
        return [r for key, r in self.results.records.items() if key in keys]


def report(cfg: TauEvalConfig, records: list[tau_report.TauResult]) -> tuple[str, Path]:
    """The run's table (also `<out>/table.txt`) and plot (`<out>/tau.png`)."""
    scores = tau_report.summarize(records, cfg.n)
    user = f"{cfg.user} user {cfg.user_model}".strip()
    title = f"τ-bench: {cfg.name}, {user}, T={cfg.temperature if cfg.temperature is not None else 'val_kwargs'}"
    table = tau_report.format_table(scores, title)
    (cfg.out / "table.txt").write_text(table + "\n")
    return table, tau_report.plot(scores, title, cfg.out / "tau.png")


# -- the command ------------------------------------------------------------------------------


def cmd_tau(args: argparse.Namespace) -> int:
    policy = args.model if args.base_url else checkpoint_name(args.model_path)
    out = args.out or Path("runs") / "eval_tau" / f"{policy}_{args.domain}_{args.split}"
    try:
        cfg = TauEvalConfig(
            domain=args.domain,
            split=args.split,
            out=Path(out),
            model_path=args.model_path,
            base_url=args.base_url,
            model=args.model,
            api_key_env=args.api_key_env,
            user=args.user,
            user_base_url=args.user_base_url,
            user_model=args.user_model,
            user_max_tokens=args.user_max_tokens,
            timeout_s=args.timeout,
            user_timeout_s=args.user_timeout,
            recipe=args.recipe,
            overrides=args.override,
            temperature=args.temperature,
            n=args.n,
            concurrency=args.concurrency,
            limit=args.limit,
            label=args.label,
        )
        evaluation = TauEvaluation(cfg, progress=not args.quiet, preflight=True)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None  # it names its section, "eval tau"
    except tau.TauDataError as exc:
        raise UsageError(f"eval tau: {exc}") from None
    print(
        f"eval tau: {len(evaluation.rows)} tasks x {cfg.n}; {cfg.domain} prompt {evaluation.prompt_tokens} tokens; "
        f"run dir {cfg.out}",
        file=sys.stderr,
    )
    t0 = time.perf_counter()
    records = evaluation.run()
    table, plot = report(cfg, records)
    print(table)
    print(f"plot: {plot}; {len(records)} episodes, {time.perf_counter() - t0:.0f} s this run")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """One table and plot over the results of several `eval tau` runs (a row per policy and domain/split)."""
    records: list[tau_report.TauResult] = []
    for run in args.runs:
        path = Path(run) / "results.jsonl"
        if not path.is_file():
            raise UsageError(f"eval tau-report: {path}: no such file; pass `eval tau` run directories")
        try:
            records += tau_report.results_file(path, option="run directory").records.values()
        except ResultsFileError as exc:  # it names the file and the line
            raise UsageError(f"eval tau-report: {exc}") from None
    scores = tau_report.summarize(records)
    title = args.title or f"τ-bench: {', '.join(sorted({r.policy for r in records}))}"
    print(tau_report.format_table(scores, title))
    print(f"plot: {tau_report.plot(scores, title, Path(args.plot))}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    try:
        user = tau_rows.UserConfig(
            user=args.user,
            base_url=args.user_base_url,
            model=args.user_model,
            max_tokens=args.user_max_tokens,
            timeout_s=args.user_timeout,
        )
        count = len(tau.load_tasks(args.domain, args.split))
    except SettingsError as exc:
        raise UsageError(f"eval tau-export: {exc}") from None
    except tau.TauDataError as exc:
        raise UsageError(f"eval tau-export: {exc}") from None
    indices = range(min(count, args.limit or count))
    path = tau_rows.build(Path(args.out), args.domain, args.split, user=user, indices=indices)
    print(f"{len(indices)} rows: {path}")
    return 0
