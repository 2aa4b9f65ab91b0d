"""Task construction (step 5, docs/method.md §1.4): queries from verified chains and from servers alone,
augmentation, LLM quality scores with per-dimension thresholds (the released scripts score but
apply no threshold: **fix**).

- *Chain-conditioned* (`task_from_chain`): `per_chain` queries that need exactly the chain's tools.
- *Server-only* (`task_from_server`): `per_server` queries needing 1..3 of the server's tools,
  each with the tools it needs (names checked against the server).
- Every query passes `query_checks.check_query` (names no tool, asks for execution); a reply
  whose queries all fail goes back to the model once, then the input is rejected.
- *Augmentation*: each base task gets one augmented task per mode in `augment` (`diverse`,
  `complicate`, `persona`: its `Task.augmentation`); the persona is picked from the personas file
  deterministically by the task's id. A failed augmentation is dropped with its reason, the base task stays.
- *Quality*: `score_task` grades question quality, scenario realism and tool necessity on 1..5;
  a task is kept when every dimension reaches its threshold (`thresholds`). A missing or
  out-of-range grade is an unusable judgement: the task is rejected (fail closed).
"""

from __future__ import annotations

import hashlib
import json
from importlib.resources import files
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from astra_foundation.llm import LLMClient
from astra_foundation.strict import StrictModel
from data_synth.prompts import load_prompt
from data_synth.traj import describe
from data_synth.traj.query_checks import check_query
from data_synth.traj.records import Scores, Server

AUGMENT_MODES = ("diverse", "complicate", "persona")
SCORE_DIMS = ("question_quality", "scenario_realism", "tool_necessity")


class TaskConfig(StrictModel):
    section = "tasks"

    per_chain: int = 2
    per_server: int = 3
    augment: list[str] = Field(default_factory=lambda: list(AUGMENT_MODES))
    personas: str | None = None  # a JSONL file of {"id", "persona"}; None: the shipped set
    thresholds: dict[str, float] = Field(
        default_factory=lambda: {"question_quality": 3, "scenario_realism": 3, "tool_necessity": 4}
    )

    @model_validator(mode="after")
    def _check(self) -> TaskConfig:
        bad = [m for m in self.augment if m not in AUGMENT_MODES]
        if bad:
            raise ValueError(f"unknown augmentation modes {bad}; choose from {AUGMENT_MODES}")
        unknown = set(self.thresholds) - set(SCORE_DIMS)
        if unknown:
            raise ValueError(f"unknown score dimensions {sorted(unknown)}; known: {SCORE_DIMS}")
        return self


class Persona(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    persona: str


def load_personas(path: str | Path | None = None) -> list[Persona]:
    """Personas from a JSONL file (one `{"id", "persona"}` a line); the shipped set by default."""
    text = (
        Path(path).read_text(encoding="utf-8")
        if path
        else (files("data_synth") / "traj" / "personas.jsonl").read_text(encoding="utf-8")
    )
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(Persona.model_validate_json(line))
        except ValueError as e:
            raise ValueError(f"{path or 'shipped personas'}:{n}: not a persona record ({e})") from None
    if not out:
        raise ValueError(f"{path or 'shipped personas'}: no personas")
    return out


def pick(items: list[Any], key: str) -> Any:
    """A deterministic choice by key."""
    h = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")
    return items[h % len(items)]


def _queries(value: Any, key: str, tool_names: list[str]) -> tuple[list[str], list[str]]:
    raw = value.get(key) if isinstance(value, dict) else None
    if not isinstance(raw, list):
        raise ValueError(f'expected {{"{key}": [...]}} with a list')
    good, bad = [], []
    for i, q in enumerate(raw):
        try:
            if not isinstance(q, str):
                raise ValueError("not a string")
            good.append(check_query(q, tool_names))
        except ValueError as e:
            bad.append(f"query {i}: {e}")
    if not good:
        raise ValueError("no usable query: " + "; ".join(bad[:4]))
    return good, bad


async def chain_queries(client: LLMClient, server: Server, tools: list[str], n: int) -> tuple[list[str], list[str]]:
    """(queries, reasons for dropped ones). Raises `LLMOutputError` when none is usable."""
    messages = load_prompt("traj/task_from_chain").messages(
        "user",
        **describe.server_fields(server),
        chain_schemas=describe.tool_schemas(server.tool(t) for t in tools),
        n=n,
    )
    reply = await client.complete_json(
        messages, step="traj.task_chain", check=lambda v: _queries(v, "queries", server.tool_names())
    )
    good, bad = reply.value
    return good[:n], bad


def _server_tasks(value: Any, server: Server) -> tuple[list[tuple[str, list[str]]], list[str]]:
    raw = value.get("tasks") if isinstance(value, dict) else None
    if not isinstance(raw, list):
        raise ValueError('expected {"tasks": [{"query": "...", "tools": [...]}]}')
    names = set(server.tool_names())
    good, bad = [], []
    for i, t in enumerate(raw):
        try:
            if not isinstance(t, dict) or not isinstance(t.get("query"), str) or not isinstance(t.get("tools"), list):
                raise ValueError('needs "query" (string) and "tools" (list)')
            tools = t["tools"]
            unknown = [x for x in tools if x not in names]
            if unknown:
                raise ValueError(f"unknown tools {unknown}")
            if not 1 <= len(tools) <= 3:
                raise ValueError(f"{len(tools)} tools, outside 1..3")
            good.append((check_query(t["query"], server.tool_names()), list(tools)))
        except ValueError as e:
            bad.append(f"task {i}: {e}")
    if not good:
        raise ValueError("no usable task: " + "; ".join(bad[:4]))
    return good, bad


async def server_tasks(client: LLMClient, server: Server, n: int) -> tuple[list[tuple[str, list[str]]], list[str]]:
    messages = load_prompt("traj/task_from_server").messages(
        "user", **describe.server_fields(server), tool_list=describe.tool_list(server.tools), n=n
    )
    reply = await client.complete_json(messages, step="traj.task_server", check=lambda v: _server_tasks(v, server))
    good, bad = reply.value
    return good[:n], bad


async def augment(client: LLMClient, server: Server, query: str, mode: str, persona: Persona | None) -> str:
    """One augmentation of `query`. Raises `LLMOutputError` when unusable."""
    values: dict[str, Any] = {"query": query}
    if mode == "persona":
        if persona is None:
            raise ValueError("persona augmentation needs a persona")
        values["persona"] = persona.persona

    def check(v: Any) -> str:
        q = v.get("query") if isinstance(v, dict) else None
        if not isinstance(q, str):
            raise ValueError('expected {"query": "..."}')
        q = check_query(q, server.tool_names())
        if q == " ".join(query.split()):
            raise ValueError("the rewrite is identical to the original")
        return q

    reply = await client.complete_json(
        load_prompt(f"traj/augment_{mode}").messages("user", **values), step=f"traj.augment_{mode}", check=check
    )
    return reply.value


def _scores(value: Any) -> Scores:
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object of grades")
    missing = [d for d in SCORE_DIMS if d not in value]
    if missing:
        raise ValueError(f"missing grades {missing}")
    for d in SCORE_DIMS:
        g = value[d]
        if isinstance(g, bool) or not isinstance(g, int | float) or not 1 <= g <= 5:
            raise ValueError(f"{d}={json.dumps(g)} is not a number in 1..5")
    return Scores(**{d: float(value[d]) for d in SCORE_DIMS}, reason=str(value.get("reason", ""))[:300])


async def score_task(client: LLMClient, server: Server, query: str) -> Scores:
    """Grades for one task. Raises `LLMOutputError` when the judgement is unusable."""
    messages = load_prompt("traj/score_task").messages(
        "user", tool_list=describe.tool_list(server.tools, io=False), query=query
    )
    return (await client.complete_json(messages, step="traj.task_score", check=_scores, temperature=0.0)).value
