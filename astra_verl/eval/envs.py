"""`python -m astra_verl.eval envs`: a policy on exported astra environments, scored as verl validates.

The episode is `astra_tool_agent` itself, built the way verl's agent-loop worker builds it (from
the composed `main_ppo` config of a recipe), so the parser, the per-sample tools, the sandbox,
the hooks and every limit are the training run's; the reward is the config's reward manager
(`astra_f1` by default) scoring the loop's episode log. Only the token server differs:

- a local checkpoint (`--model-path`) is served by the `hf_cpu` backend's own server
  (`astra_verl.platform.hf_rollout.HFRolloutServer`, in this process, loaded with the checkpoint's
  weights), which batches the concurrent episodes' requests;
- with `--base-url URL --model NAME` an OpenAI-compatible endpoint serving that checkpoint answers
  instead (`endpoint.EndpointServer`: token prompts in, token ids out, through the LLM client);
  `--model-path` then gives the tokenizer and chat template the loop renders with.

Sampling: by default the config's validation settings (`rollout.val_kwargs`: greedy), i.e. what
`trainer.val_before_train` runs; `--temperature T --n K` samples K episodes per row. The sampling
parameters are built as verl's agent-loop worker builds them.

Results (`<out>/results.jsonl`, resumable: a rerun runs only what is not scored yet; see
`astra_verl.eval.results`): one `EnvEpisode` per (row, sample) with the reward, its counts, the
row's domain, scenario type, hop count and variant, how the episode ended, and the decoded response. A
file holds one policy at one temperature: another's is refused before the first episode.
`envs_report` turns them into the table and the plot.

The user of missing-value rows: the scripted one the row carries, or with `--user-base-url URL
--user-model NAME` one worded by that LLM (`env_registry.variants.interaction_kwargs` rewrites
those rows' hook configuration, as `export-parquet` with the same flags writes it; when the user
speaks stays the scripted rule). The endpoint is checked before the first episode
(`check_user`), and each record names its user (`user`: "scripted" or "llm:MODEL"), part of the
run's settings: a file holds one user's episodes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import pandas as pd
import torch
from omegaconf import DictConfig, OmegaConf
from pydantic import Field, model_validator
from tqdm.auto import tqdm
from transformers import AutoConfig, AutoTokenizer
from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
from verl.utils.ray_utils import get_event_loop
from verl.workers.rollout.replica import RolloutMode

from astra_foundation.errors import UserError
from astra_foundation.llm import LLMConfig, LLMFlags, build_client, preflight, split_urls
from astra_foundation.strict import StrictModel
from astra_verl.calls.call_log import EpisodeLog
from astra_verl.eval.endpoint import EndpointServer
from astra_verl.eval.results import ResultRecord, ResultsFile
from astra_verl.platform.hf_rollout import HFRolloutServer
from astra_verl.reward.managers import AstraRewardManager
from astra_verl.rollout.context import RolloutContext
from astra_verl.rollout.testing import compose_trainer_config, make_loop
from env_registry.rows import RowInfo, row_env
from env_registry.shape import shape_of
from env_registry.spec import EnvSpec, Variant
from env_registry.store import EnvStore
from env_registry.variants import LLMUserConfig, interaction_kwargs

RESULTS_VERSION = 1


class EnvEvalError(UserError, ValueError):
    """The evaluation cannot run as asked (bad data, settings that contradict each other)."""


class EnvEvalConfig(StrictModel):
    """One `eval envs` run."""

    section = "eval envs"

    data: Path
    out: Path
    model_path: str  # a local checkpoint (HF format): served by hf_cpu's server, or its tokenizer for an endpoint
    base_url: str | None = None  # an OpenAI-compatible endpoint (comma-separated: a pool) serving the policy
    model: str | None = None  # the endpoint's name of the policy
    api_key_env: str = "OPENAI_API_KEY"  # variable holding the endpoint's key (unset: none)
    timeout_s: float = Field(default=120.0, gt=0)  # per request to the endpoint
    recipe: str = "astra_cpu"
    overrides: list[str] = Field(default_factory=list)
    temperature: float | None = Field(default=None, ge=0)  # None: the config's val_kwargs (greedy)
    top_p: float | None = Field(default=None, gt=0, le=1)
    top_k: int | None = None
    n: int = Field(default=1, ge=1)
    concurrency: int = Field(default=8, ge=1)
    limit: int | None = Field(default=None, ge=1)
    seed: int = 0
    label: str = ""  # a name for the policy in tables and plots (default: the model's)
    # the LLM that words the missing-value rows' user (None: the rows' scripted user)
    user_base_url: str | None = None
    user_model: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> EnvEvalConfig:
        if self.n > 1 and not self.temperature:
            raise ValueError("--n > 1 needs --temperature > 0: greedy decoding repeats one episode")
        if (self.base_url is None) != (self.model is None):
            raise ValueError("an endpoint needs both --base-url and --model (the name the server gives the policy)")
        if bool(self.user_base_url) != bool(self.user_model):
            raise ValueError(
                "an LLM user needs both --user-base-url and --user-model (leave both out for the scripted user)"
            )
        return self

    @property
    def name(self) -> str:
        return self.label or checkpoint_name(self.model_path)

    @property
    def user(self) -> LLMUserConfig | None:
        """The LLM user of missing-value rows, None for the scripted one."""
        if not self.user_base_url or not self.user_model:
            return None
        return LLMUserConfig(base_url=self.user_base_url, model=self.user_model)

    @property
    def user_name(self) -> str:
        return "scripted" if self.user is None else self.user.describe()


def checkpoint_name(path: str) -> str:
    """A checkpoint's short name: verl's `<run>/global_step_N/huggingface` is `global_step_N`."""
    p = Path(path)
    return p.parent.name if p.name == "huggingface" else p.name


class EnvEpisode(ResultRecord):
    """One scored episode (a line of the results file; one policy and temperature per file)."""

    section = "eval envs results record"
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ("policy", "temperature", "user")

    version: Literal[1] = RESULTS_VERSION
    id: str  # "<row>:<sample>"
    status: Literal["scored"] = "scored"
    policy: str
    env_id: str
    row: int
    sample: int
    data_source: str
    domain: str
    scenario_type: str
    hops: int
    # the environment's variant (docs/environments.md, "Variants"); lines written before it was a
    # field are answerable episodes: no other variant existed
    variant: str = "answerable"
    temperature: float
    # who answered the missing-value rows' questions: "scripted" (lines written before the field
    # existed: no other user existed) or "llm:MODEL" (--user-model)
    user: str = "scripted"
    reward: float
    f1: float
    precision: float
    recall: float
    solved: int
    n: int
    calls: int
    invalid_calls: int
    distractor_calls: int
    tool_errors: int
    turns: int
    final_answer_correct: bool
    terminated_by: str
    response: str  # the decoded response (tool observations included), as verl's validation dumps it
    response_sha: str
    elapsed_s: float


def results_file(
    path: Path, policy: str | None = None, temperature: float | None = None, user: str = "scripted"
) -> ResultsFile[EnvEpisode]:
    """The run's results file at `path`; `policy`, `temperature` and `user`: the run that appends (a
    file of another policy's, temperature's or user's is refused here), None to read."""
    run = None if policy is None else {"policy": policy, "temperature": temperature, "user": user}
    return ResultsFile(path, EnvEpisode, run=run)


# -- rows --------------------------------------------------------------------------------------


def load_rows(path: Path, limit: int | None) -> list[dict[str, Any]]:
    if not path.exists():
        raise EnvEvalError(f"--data {path}: no such file (an `env_registry export-parquet` train/val parquet)")
    rows = pd.read_parquet(path).to_dict("records")
    if not rows:
        raise EnvEvalError(f"--data {path}: the file has no rows")
    for i, row in enumerate(rows):
        missing = {"prompt", "extra_info", "reward_model", "data_source"} - set(row)
        if missing:
            raise EnvEvalError(f"--data {path}: row {i} lacks {sorted(missing)}; export it with env_registry")
        RowInfo.from_extra_info(row["extra_info"])  # raises RowError naming the problem
    return rows[:limit] if limit else rows


def episode_kwargs(row: dict[str, Any]) -> dict[str, Any]:
    """The dataset fields verl's agent-loop worker passes to `AgentLoopBase.run` (RLHFDataset's row)."""
    extra = dict(row["extra_info"])
    prompt = row["prompt"]
    return {
        "raw_prompt": [dict(m) for m in (prompt.tolist() if hasattr(prompt, "tolist") else prompt)],
        "extra_info": extra,
        "reward_model": row["reward_model"],
        "data_source": row["data_source"],
        "index": extra.get("index", 0),
        "tools_kwargs": extra.get("tools_kwargs") or {},
        "interaction_kwargs": extra.get("interaction_kwargs") or {},
    }


def env_facts(env: EnvSpec) -> dict[str, Any]:
    """Domain, scenario type, hop count and variant of a row's environment (carried by the row or from its store)."""
    return {
        "env_id": env.id,
        "domain": env.domain,
        "scenario_type": env.scenario_type.value,
        "hops": shape_of(env).hops,
        "variant": env.variant.value,
    }


def with_user(row: dict[str, Any], env: EnvSpec, user: LLMUserConfig | None) -> dict[str, Any]:
    """`row` with its missing-value user worded by `user` (the hook configuration export-parquet
    writes with the same flags); any other row, or no `user`, as it is."""
    if user is None or env.variant is not Variant.MISSING_VALUE:
        return row
    extra = dict(row["extra_info"])
    extra["interaction_kwargs"] = interaction_kwargs(env, dict(extra.get("interaction_kwargs") or {}), user)
    return {**row, "extra_info": extra}


def check_user(cfg: EnvEvalConfig) -> None:
    """PreflightError (what failed and which flag to fix) unless the LLM user's endpoint answers and
    serves its model: before the first episode, not at the first question asked minutes into the run.
    The hook's client reads the key from LLMConfig's default variable, so the check does too."""
    user = cfg.user
    if user is not None:
        preflight(LLMConfig(base_urls=split_urls(user.base_url), model=user.model), flags=LLMFlags("user"))


# -- the policy's server ----------------------------------------------------------------------


def trainer_config(cfg: EnvEvalConfig) -> DictConfig:
    """The composed `main_ppo` config the episodes run under: the recipe, the data, the policy, overrides."""
    base = [f"+recipe={cfg.recipe}", f"data.val_files={cfg.data.resolve()}"]
    try:
        config = compose_trainer_config(cfg.model_path, [*base, *cfg.overrides])
    except Exception as exc:  # noqa: BLE001 - Hydra's errors name the bad override; say where it came from
        raise EnvEvalError(f"composing +recipe={cfg.recipe} with {cfg.overrides}: {exc}") from exc
    config.actor_rollout_ref.rollout.name = "hf_cpu"  # the backend serving it here (the harness presets vllm)
    return config


def local_server(config: DictConfig) -> HFRolloutServer:
    """The `hf_cpu` rollout server of the training runs, in this process, holding the checkpoint's weights."""

    def section(node: DictConfig) -> DictConfig:
        return OmegaConf.create(OmegaConf.to_container(node, resolve=True))

    rollout = section(config.actor_rollout_ref.rollout)
    rollout.load_format = "auto"  # the trainer would sync its weights into a dummy model; here they are loaded
    return HFRolloutServer(rollout, section(config.actor_rollout_ref.model), RolloutMode.STANDALONE, replica_rank=0)


def endpoint_server(cfg: EnvEvalConfig, config: DictConfig) -> EndpointServer:
    """The policy behind `cfg.base_url`, asked through the LLM client with the rollout's token budgets."""
    llm = LLMConfig(
        base_urls=split_urls(cfg.base_url),
        model=cfg.model,
        api_key_env=cfg.api_key_env,
        max_concurrency=cfg.concurrency,
        timeout_s=cfg.timeout_s,
        cache=False,
    )
    rollout = config.actor_rollout_ref.rollout
    return EndpointServer(
        build_client(llm), prompt_length=int(rollout.prompt_length), response_length=int(rollout.response_length)
    )


def sampling_params(config: DictConfig, cfg: EnvEvalConfig) -> dict[str, Any]:
    """verl's agent-loop worker's sampling params (v1 `AgentLoopWorkerTQ.generate_sequences`), validation
    settings by default, the run's temperature / top_p / top_k where given."""
    rollout = config.actor_rollout_ref.rollout
    val = rollout.val_kwargs
    return {
        "temperature": val.temperature if cfg.temperature is None else cfg.temperature,
        "top_p": val.top_p if cfg.top_p is None else cfg.top_p,
        "top_k": val.top_k if cfg.top_k is None else cfg.top_k,
        "repetition_penalty": 1.0,
        "logprobs": rollout.calculate_log_probs,
    }


def reward_manager(config: DictConfig, tokenizer: Any) -> AstraRewardManager:
    name = config.reward.reward_manager.name
    cls = REWARD_MANAGER.get(name)
    if cls is None or not issubclass(cls, AstraRewardManager):
        raise EnvEvalError(
            f"reward.reward_manager.name={name!r}: `eval envs` scores astra environments with an astra reward "
            "manager (astra_f1, astra_recall, astra_precision); BFCL rows: `python -m astra_verl.eval bfcl`"
        )
    return cls(config, tokenizer, compute_score=None)


# -- running ----------------------------------------------------------------------------------


async def fan_out(
    todo: Sequence[tuple[int, int]],
    episode: Callable[[int, int], Awaitable[Any]],
    on_done: Callable[[Any], None],
    *,
    concurrency: int,
    owner: Any,
) -> None:
    """`on_done(await episode(i, k))` for each (row, sample) of `todo`, `concurrency` at a time; then
    the episodes left are cancelled (a failure propagates after the finished ones were handed over)
    and `owner`'s token server (if this process's: hf_cpu's or an endpoint client) and rollout
    context (sandbox pool) are closed. Shared by `eval envs` and `eval tau`."""
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, k: int) -> None:
        async with gate:
            on_done(await episode(i, k))

    tasks = [asyncio.ensure_future(one(i, k)) for i, k in todo]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if isinstance(owner.server, HFRolloutServer | EndpointServer):
            await owner.server.aclose()
        await owner.context.aclose()


class EnvEvaluation:
    """The episodes of one run: `run()` evaluates every (row, sample) not yet in the results file."""

    def __init__(self, cfg: EnvEvalConfig, *, server: Any = None, progress: bool = True):
        self.cfg = cfg
        self.config = trainer_config(cfg)
        self.tokenizer = AutoTokenizer.from_pretrained(cfg.model_path)
        # verl's worker hands the loop the checkpoint's model_type: it picks the multi-turn token builder
        self.model_type = AutoConfig.from_pretrained(cfg.model_path).model_type
        self.rows = load_rows(cfg.data, cfg.limit)
        stores: dict[str, EnvStore] = {}
        envs = [row_env(RowInfo.from_extra_info(r["extra_info"]), stores) for r in self.rows]
        self.facts = [env_facts(e) for e in envs]
        self.rows = [with_user(r, e, cfg.user) for r, e in zip(self.rows, envs, strict=True)]
        self.params = sampling_params(self.config, cfg)
        self.reward = reward_manager(self.config, self.tokenizer)
        # another run's file is refused here, before the first episode
        self.results = results_file(
            cfg.out / "results.jsonl", cfg.name, float(self.params["temperature"]), cfg.user_name
        )
        self.server = server
        self.context = RolloutContext()  # this run's sandbox pool and tool caches, as a verl worker's
        self.progress = progress

    def todo(self) -> list[tuple[int, int]]:
        return [(i, k) for i in range(len(self.rows)) for k in range(self.cfg.n) if not self.results.done(f"{i}:{k}")]

    def _server(self) -> Any:
        if self.server is None:
            self.server = endpoint_server(self.cfg, self.config) if self.cfg.base_url else local_server(self.config)
        return self.server

    async def episode(self, i: int, k: int) -> EnvEpisode:
        row, facts = self.rows[i], self.facts[i]
        t0 = time.perf_counter()
        loop = make_loop(
            self.config, self._server(), self.tokenizer, hf_model_type=self.model_type, context=self.context
        )
        out = await loop.run(dict(self.params), **episode_kwargs(row))
        scored = await self.reward.score(
            {
                "reward_model": row["reward_model"],
                "tool_extra_fields": out.extra_fields,
                "data_source": row["data_source"],
            }
        )
        info = scored.extra_info
        log = EpisodeLog.from_extra_fields(out.extra_fields)
        response = self.tokenizer.decode(out.response_ids, skip_special_tokens=True)
        return EnvEpisode(
            id=f"{i}:{k}",
            policy=self.cfg.name,
            row=i,
            sample=k,
            data_source=row["data_source"],
            temperature=float(self.params["temperature"]),
            user=self.cfg.user_name,
            reward=float(scored.reward),
            f1=info["f1"],
            precision=info["precision"],
            recall=info["recall"],
            solved=int(info["solved"]),
            n=int(info["n"]),
            calls=int(info["calls"]),
            invalid_calls=int(info["invalid_calls"]),
            distractor_calls=int(info["distractor_calls"]),
            tool_errors=int(info["tool_errors"]),
            turns=int(info["turns"]),
            final_answer_correct=bool(info["final_answer_correct"]),
            terminated_by=log.terminated_by.value if log.terminated_by else "",
            response=response,
            response_sha=hashlib.sha256(response.encode()).hexdigest()[:16],
            elapsed_s=round(time.perf_counter() - t0, 3),
            **facts,
        )

    async def _run(self, todo: Sequence[tuple[int, int]], on_done: Callable[[EnvEpisode], None]) -> None:
        await fan_out(todo, self.episode, on_done, concurrency=self.cfg.concurrency, owner=self)

    def run(self) -> ResultsFile[EnvEpisode]:
        """Run what is left; any failure propagates after the finished episodes are written."""
        torch.manual_seed(self.cfg.seed)
        todo = self.todo()
        bar = tqdm(total=len(todo), desc=f"eval {self.cfg.name}", unit="episode", disable=not self.progress)
        total = {"reward": 0.0, "n": 0}

        def on_done(record: EnvEpisode) -> None:
            self.results.append(record)
            total["reward"] += record.reward
            total["n"] += 1
            bar.update(1)
            bar.set_postfix(reward=f"{total['reward'] / total['n']:.3f}")

        try:
            get_event_loop().run_until_complete(self._run(todo, on_done))
        finally:
            bar.close()
        return self.results

    def records(self) -> list[EnvEpisode]:
        keys = {f"{i}:{k}" for i in range(len(self.rows)) for k in range(self.cfg.n)}
        return [r for key, r in self.results.records.items() if key in keys]


def write_manifest(cfg: EnvEvalConfig, evaluation: EnvEvaluation, seconds: float) -> Path:
    path = cfg.out / "manifest.json"
    body = {
        "config": json.loads(cfg.model_dump_json()),
        "sampling_params": evaluation.params,
        "rows": len(evaluation.rows),
        "episodes": len(evaluation.records()),
        "seconds": round(seconds, 1),
    }
    path.write_text(json.dumps(body, indent=2))
    return path
