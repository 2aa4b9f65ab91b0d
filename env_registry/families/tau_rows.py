"""verl rows of τ-bench tasks (the `tau_bench` family, `tau`): one row per task, for
`astra_tool_agent` with the `tau_user` hook and the `astra_tau` reward.

A row's prompt is the domain's policy as the system message; the first user message comes from
the simulated user (`tau_user` hook, `on_start`). The user is chosen at export (`UserConfig`):
`scripted` (it states the task's instruction in one message, then ends the conversation after
the agent's reply: tests and dry runs) or `llm` (τ-bench's default user strategy over an
OpenAI-compatible endpoint; the endpoint is required). `build` writes
`<out>/<domain>_<split>.parquet` and `<out>/<domain>_<split>.manifest.json`. Rows are
self-contained (`RowInfo.env`: the task's spec inside the row, ~17 KB), as the export's default
rows are: the parquet alone is the dataset on any node, copied anywhere.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from astra_foundation.strict import StrictModel
from env_registry.export import ABILITY, DATA_SOURCE_PREFIX, write_parquet
from env_registry.families import tau
from env_registry.rows import AGENT_NAME, RowInfo, ToolRef
from env_registry.spec import EnvSpec

HOOK_NAME = "tau_user"  # astra_verl.benchmarks.tau_hook (env_registry does not import the plugin)


class UserConfig(StrictModel):
    """The simulated user of exported rows."""

    section = "tau user"

    user: Literal["scripted", "llm"] = "scripted"
    base_url: str = ""  # llm: the OpenAI-compatible endpoint (…/v1)
    model: str = ""  # llm: the model it serves
    # llm: tokens per user turn (None: the client's default, 4096) and seconds per request. A small
    # model as user can ramble for thousands of tokens; on CPU that outlasts the request timeout.
    max_tokens: int | None = Field(default=None, ge=1)
    timeout_s: float = Field(default=120.0, gt=0)

    @model_validator(mode="after")
    def _endpoint(self) -> UserConfig:
        if self.user == "llm" and not (self.base_url and self.model):
            raise ValueError("an LLM user needs base_url and model (the user simulator's endpoint)")
        return self


def interaction_kwargs(task: tau.TauTask, user: UserConfig) -> dict[str, Any]:
    """`extra_info.interaction_kwargs` of the task's row (strings only: parquet-friendly)."""
    kwargs = {
        "name": HOOK_NAME,
        "task": task.id,
        "user": user.user,
        "terminate_tools": json.dumps(list(tau.get_domain(task.domain).terminate_tools)),
    }
    if user.user == "scripted":
        return {**kwargs, "script": json.dumps([task.instruction])}
    llm = {
        "instruction": task.instruction,
        "base_url": user.base_url,
        "model": user.model,
        "timeout_s": str(user.timeout_s),
    }
    if user.max_tokens is not None:
        llm["max_tokens"] = str(user.max_tokens)
    return {**kwargs, **llm}


def task_row(task: tau.TauTask, spec: EnvSpec, target: tau.TauTarget, user: UserConfig, index: int) -> dict:
    info = RowInfo(
        env_id=spec.id, env=spec.model_dump(mode="json"), tools=[ToolRef(spec.id, n) for n in tau.shown_tools(spec)]
    )
    return {
        "data_source": f"{DATA_SOURCE_PREFIX}{tau.DOMAIN_PREFIX}{task.domain}",
        "prompt": [{"role": "system", "content": tau.policy(task.domain)}],
        "ability": ABILITY,
        "agent_name": AGENT_NAME,
        "reward_model": {"style": "rule", "ground_truth": target.to_json()},
        "extra_info": {
            "index": index,
            "split": task.split,
            "astra": info.to_json(),
            "interaction_kwargs": interaction_kwargs(task, user),
        },
    }


def build(
    out: str | Path,
    domain: str,
    split: str,
    *,
    user: UserConfig | None = None,
    indices: Sequence[int] | None = None,
    progress: Any = None,
) -> Path:
    """Write `<domain>_<split>.parquet` and the manifest for the split's tasks (or
    those at `indices`); the gold digests come from replaying each task's gold actions in the
    sandbox. Returns the parquet path."""
    out = Path(out)
    user = user or UserConfig()
    tasks = tau.load_tasks(domain, split)
    if indices is not None:
        tasks = [tasks[i] for i in indices]
    version = tau.tau_version()
    specs = [tau.task_spec(t, version) for t in tasks]
    digests = tau.replay_digests([(s, t.actions) for s, t in zip(specs, tasks, strict=True)], progress=progress)
    rows = [
        task_row(t, s, tau.task_target(t, s.id, d, version), user, i)
        for i, (t, s, d) in enumerate(zip(tasks, specs, digests, strict=True))
    ]
    path = out / f"{domain}_{split}.parquet"
    write_parquet(rows, path)
    manifest = {
        "format": "astra-tau-rows",
        "version": tau.TARGET_VERSION,
        "tau_bench_version": version,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "domain": domain,
        "split": split,
        "rows": len(rows),
        "user": user.model_dump(),
    }
    (out / f"{domain}_{split}.manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return path
