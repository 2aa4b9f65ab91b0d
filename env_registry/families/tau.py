"""The `tau_bench` family: τ-bench's tasks (sierra-research/tau-bench) as environments.

Source: the installed `tau_bench` package, used in place (its tasks, tool classes, databases and
policy documents; nothing of it is copied here). A domain is data (`TauDomain`): where its task
splits, policy and tools live in the package. τ-bench ships retail (train 500, dev 20, test 115
tasks) and airline (test 50).

One task becomes an `EnvSpec`:

- tools: every tool class of the domain (its OpenAI schema from `get_info()`), each a sandbox
  module that calls `env_registry.families.tau_sandbox.invoke`: τ-bench's own class runs in the
  episode's sandbox session against the session's deep copy of the domain database, which each
  sandbox worker preloads once (`SANDBOX`, `tau_sandbox.load_databases`). Plus one tool the model is never shown,
  `STATE_TOOL`, which returns the digest of the session's database for the reward.
- question: the task's instruction. It is what the user simulator holds (the agent's prompt is
  the policy document, `policy()`, and the simulated user's first message), kept here so the
  environment is self-describing; the rows put the policy, not the instruction, in the prompt.
- no final answer and no sub-questions: τ-bench judges the database and the required outputs.

`TauTarget` (`task_target`) is what τ-bench's reward needs: the digest of the database after the
task's gold actions (computed by replaying them through the sandbox, `gold_digests`) and the
outputs the agent must tell the user.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from astra_foundation.errors import UserError
from astra_foundation.sandbox import BatchJob, Module, Program, SandboxConfig, run_programs
from astra_foundation.strict import RecordModel
from env_registry.family_rules import FamilyRules, ReplayCall
from env_registry.spec import EnvSpec, Provenance, ScenarioType, ToolSpec, tool_module

GENERATOR = "tau_bench"
DOMAIN_PREFIX = "tau_bench_"
TARGET_VERSION = 1
STATE_TOOL = "astra_tau_state_digest"  # hidden: never shown to the model, called by the reward's replay
RESPOND = "respond"  # τ-bench's name for a message from the agent to the user
SANDBOX_PRELOAD = "env_registry.families.tau_sandbox:load_databases"
SANDBOX = {
    "packages": ["tau_bench", "env_registry"],
    "preload": [SANDBOX_PRELOAD],
    # Both databases live in each worker and a session deep-copies one (airline: ~5 MB of JSON).
    "memory_mb": 2048,
    "max_output_chars": 200_000,  # τ-bench does not truncate observations (search results, orders)
    "call_timeout_s": 30.0,
}


class TauDataError(UserError, ValueError):
    """The installed tau_bench does not hold what this adapter reads."""


@dataclass(frozen=True)
class TauDomain:
    """Where a domain lives in the `tau_bench` package: `tau_bench.envs.<name>` with `tools`
    (ALL_TOOLS), `data` (load_data), `wiki` (WIKI) and one `module:attribute` per task split."""

    name: str
    splits: dict[str, str]
    terminate_tools: tuple[str, ...] = ("transfer_to_human_agents",)  # τ-bench's Env.terminate_tools


DOMAINS: dict[str, TauDomain] = {
    "retail": TauDomain(
        "retail",
        {
            "train": "tasks_train:TASKS_TRAIN",
            "dev": "tasks_dev:TASKS_DEV",
            "test": "tasks_test:TASKS_TEST",
        },
    ),
    "airline": TauDomain("airline", {"test": "tasks_test:TASKS"}),
}


def _import(domain: str, leaf: str) -> Any:
    # τ-bench's envs import litellm at module level, which fetches a model cost map over the
    # network unless told to use its bundled copy.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return importlib.import_module(f"tau_bench.envs.{domain}.{leaf}")


def get_domain(name: str) -> TauDomain:
    if name not in DOMAINS:
        raise TauDataError(f"unknown τ-bench domain {name!r}; known: {sorted(DOMAINS)}")
    return DOMAINS[name]


@cache
def tau_version() -> str:
    return importlib.metadata.version("tau_bench")


@dataclass(frozen=True)
class TauTask:
    """One τ-bench task: `actions` are its gold actions as (name, kwargs)."""

    domain: str
    split: str
    index: int
    user_id: str
    instruction: str
    actions: tuple[tuple[str, dict[str, Any]], ...]
    outputs: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.domain}/{self.split}/{self.index}"


def load_tasks(domain: str, split: str) -> list[TauTask]:
    """The split's tasks, in τ-bench's order (index = τ-bench's task_index)."""
    d = get_domain(domain)
    if split not in d.splits:
        raise TauDataError(f"τ-bench domain {domain!r} has no split {split!r}; it has {sorted(d.splits)}")
    module, _, attr = d.splits[split].partition(":")
    raw = getattr(_import(domain, module), attr)
    return [
        TauTask(
            domain=domain,
            split=split,
            index=i,
            user_id=t.user_id,
            instruction=t.instruction,
            actions=tuple((a.name, dict(a.kwargs)) for a in t.actions),
            outputs=tuple(t.outputs),
        )
        for i, t in enumerate(raw)
    ]


@cache
def policy(domain: str) -> str:
    """The domain's policy document (τ-bench's WIKI): the agent's system prompt."""
    get_domain(domain)
    return _import(domain, "wiki").WIKI


@cache
def tool_infos(domain: str) -> tuple[dict[str, Any], ...]:
    """The `get_info()` of each of the domain's tool classes (OpenAI function schemas)."""
    get_domain(domain)
    return tuple(cls.get_info() for cls in _import(domain, "tools").ALL_TOOLS)


_TOOL_SOURCE = '''"""τ-bench {domain}: `{name}`, τ-bench's own tool class on this session's database."""

from env_registry.families.tau_sandbox import invoke


def {name}(**kwargs):
    return invoke({domain!r}, {name!r}, kwargs)
'''

_STATE_SOURCE = '''"""The digest of this session's τ-bench {domain} database (for the reward; never shown)."""

from env_registry.families.tau_sandbox import state_digest


def {name}():
    return state_digest({domain!r})
'''


def tool_specs(domain: str) -> list[ToolSpec]:
    """The domain's tools, then the hidden `STATE_TOOL`."""
    specs = []
    for info in tool_infos(domain):
        fn = info["function"]
        if not fn["name"].isidentifier():
            raise TauDataError(f"τ-bench {domain} tool name {fn['name']!r} is not a Python identifier")
        source = _TOOL_SOURCE.format(domain=domain, name=fn["name"])
        specs.append(
            ToolSpec(name=fn["name"], description=fn["description"], parameters=fn["parameters"], source=source)
        )
    state = _STATE_SOURCE.format(domain=domain, name=STATE_TOOL)
    empty = {"type": "object", "properties": {}}
    specs.append(
        ToolSpec(name=STATE_TOOL, description="digest of the database (internal)", parameters=empty, source=state)
    )
    return specs


def shown_tools(env: EnvSpec) -> list[str]:
    """The tools the model sees: all but `STATE_TOOL`."""
    return [t.name for t in env.tools if t.name != STATE_TOOL]


def task_spec(task: TauTask, version: str | None = None) -> EnvSpec:
    """The environment of one task (see the module docstring)."""
    return EnvSpec.create(
        domain=DOMAIN_PREFIX + task.domain,
        question=task.instruction,
        final_answer="",
        scenario_type=ScenarioType.MULTI_HOP,
        sub_questions=[],
        tools=tool_specs(task.domain),
        provenance=Provenance(generator=GENERATOR, source=f"tau_bench=={version or tau_version()}:{task.id}"),
    )


def replay_calls(env: EnvSpec, actions: Sequence[tuple[str, dict[str, Any]]]) -> list[tuple[str, str, dict[str, Any]]]:
    """Sandbox calls (module, function, kwargs) that run `actions` (τ-bench tool actions; `respond`
    ones are skipped: they change no database) and then ask for the database digest, last."""
    names = {t.name for t in env.tools}
    calls = []
    for name, kwargs in actions:
        if name == RESPOND:
            continue
        if name not in names or name == STATE_TOOL:
            raise TauDataError(f"environment {env.id}: no τ-bench tool {name!r}")
        calls.append((tool_module(name, env.id), name, dict(kwargs)))
    calls.append((tool_module(STATE_TOOL, env.id), STATE_TOOL, {}))
    return calls


class TauTarget(RecordModel):
    """`reward_model.ground_truth` of a τ-bench row: what τ-bench's reward needs."""

    version: int = TARGET_VERSION
    tau_bench_version: str
    task: str  # domain/split/index
    env_id: str
    gold_digest: str  # the database digest after the task's gold actions (`tau_sandbox.state_digest`)
    outputs: list[str]  # what the agent must tell the user (τ-bench's Task.outputs)
    terminate_tools: list[str]
    actions: str  # the gold actions, JSON [{name, kwargs}] (`action_json`): the F1 ablation's sub-questions

    def to_json(self) -> str:
        return self.model_dump_json()


def task_target(task: TauTask, env_id: str, gold_digest: str, version: str | None = None) -> TauTarget:
    return TauTarget(
        tau_bench_version=version or tau_version(),
        task=task.id,
        env_id=env_id,
        gold_digest=gold_digest,
        outputs=list(task.outputs),
        terminate_tools=list(get_domain(task.domain).terminate_tools),
        actions=action_json(task.actions),
    )


def action_json(actions: Sequence[tuple[str, dict[str, Any]]]) -> str:
    return json.dumps([{"name": n, "kwargs": k} for n, k in actions], sort_keys=True)


# -- replay in the sandbox --------------------------------------------------------------------


def sandbox_config(**overrides: Any) -> SandboxConfig:
    """A `SandboxConfig` the family's tools run in (`SANDBOX`, then `overrides`)."""
    return SandboxConfig(**{**SANDBOX, **overrides})


def program(env: EnvSpec) -> Program:
    return Program(tuple(Module(name=tool_module(t.name, env.id), source=t.source) for t in env.tools))


def replay_digests(
    jobs: Sequence[tuple[EnvSpec, Sequence[tuple[str, dict[str, Any]]]]],
    config: SandboxConfig | None = None,
    *,
    progress: Any = None,
) -> list[str]:
    """The database digest after each job's actions, each job in a fresh sandbox session of its
    environment. A failed call (the sandbox's error, not a tool's "Error: ..." observation, which
    τ-bench counts as a normal step) raises: a replay that did not run must not be scored."""
    batch = [BatchJob(program(env), replay_calls(env, actions)) for env, actions in jobs]
    results = run_programs(batch, config or sandbox_config(), progress=progress)
    digests = []
    for (env, _), calls in zip(jobs, results, strict=True):
        for call in calls:
            if not call.ok:
                raise TauDataError(
                    f"environment {env.id} ({env.provenance.source}): a replayed call failed: {call.text}"
                )
        digests.append(calls[-1].output)
    return digests


# -- validation (`env_registry validate`, `family_rules`) -------------------------------------


def task_of(env: EnvSpec) -> TauTask:
    """The τ-bench task an environment was built from (`provenance.source`), from the installed
    tau_bench, which must be the version the environment was built with."""
    version, _, task_id = (env.provenance.source or "").partition(":")
    if version != f"tau_bench=={tau_version()}":
        raise TauDataError(
            f"environment {env.id} was built from {env.provenance.source!r}, but tau_bench=={tau_version()} "
            "is installed; rebuild the rows with the installed version"
        )
    domain, split, index = task_id.split("/")
    return load_tasks(domain, split)[int(index)]


def gold_replay(env: EnvSpec) -> list[ReplayCall]:
    """The task's gold actions (τ-bench's reward judges the database they leave, not their outputs)."""
    index = {t.name: i for i, t in enumerate(env.tools)}
    return [ReplayCall(f"actions[{k}]", index[name], kwargs) for k, (name, kwargs) in enumerate(task_of(env).actions)]


# No final answer and no sub-question trace: τ-bench judges the database and the required outputs.
_NOT_APPLICABLE = {("non_empty", "final_answer"), ("has_tool_node", "sub_questions")}

VALIDATION = FamilyRules(
    replay_calls=gold_replay,
    waives=lambda rule, field: (rule, field) in _NOT_APPLICABLE,
    sandbox=dict(SANDBOX),
)
