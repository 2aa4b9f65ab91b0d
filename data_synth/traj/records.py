"""Typed records of the trajectory pipeline (docs/method.md §1), one class per step boundary.

    traj.ingest     SourceRecord   -> Server            key: server id
    traj.graph      Server         -> GraphRecord       key: server id
    traj.chains     GraphRecord    -> [Chain]           key: chain id (hash of server id + tools)
    traj.verify     Chain          -> VerifiedChain     key: chain id
    traj.tasks      TaskSeed       -> [Task]            key: task id (hash of server, query, augmentation)
    traj.augment    AugmentJob     -> Task              key: task id of the augmented task
    traj.score      Task           -> ScoredTask        key: task id
    traj.variants   VariantJob     -> ScoredTask        key: task id of the variant task (`variants.py`)
    traj.interact   ScoredTask     -> Trajectory        key: task id
    traj.judge      Trajectory     -> JudgedTrajectory  key: task id

Every record is a `data_synth.pipeline.Record` (a pydantic model with `key`; its class `VERSION`
goes to disk as `record_version`, and readers refuse versions they do not know). On disk each
step is a JSONL file of the pipeline's envelopes (status ok / rejected / error, reason).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

import networkx as nx
from pydantic import AliasChoices, Field

from astra_foundation.strict import RecordModel
from data_synth.pipeline import Record
from env_registry.call_gate import CallStatus
from env_registry.spec import Variant


def content_id(*parts: Any, n: int = 16) -> str:
    """A short stable hash of JSON-serialisable parts."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:n]


class _Model(RecordModel):
    """Base of the nested parts of the trajectory records (`RecordModel`: unknown keys refused)."""


# -- ingest -------------------------------------------------------------------------------
class SourceRecord(Record):
    """One server's raw documentation as found in an input file (before validation).

    `key` is `<file>#<index>`. `error` marks a file that could not be read at all, and
    `duplicate_of` a server whose id an earlier record already took; both are rejected."""

    file: str
    index: int
    format: str | None = None
    server_name: str | None = None
    domain: str = ""
    content: Any = None
    error: str | None = None
    duplicate_of: str | None = None


class ToolDoc(_Model):
    """One tool of a server: an OpenAI function (normalized `parameters`) and, where the source
    documents it, the JSON Schema of what it returns (`output`), used by edge scoring."""

    name: str
    description: str = ""
    parameters: dict[str, Any]
    output: dict[str, Any] | None = None

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class Source(_Model):
    file: str
    record: int = Field(description="0-based record index in the file (line for JSONL, element for a JSON list)")
    format: str


class DroppedTool(_Model):
    tool: str
    reason: str


class Server(Record):
    """A tool server (an MCP server in ASTRA's corpus) with its valid tools.

    `call_info` is ASTRA's optional endpoint description, kept verbatim (e.g. `{"mock_tool": true}`
    or an MCP `{"command": ..., "args": [...]}`); `interact --backend mcp` reads it.
    `dropped_tools` are the tools that failed validation, `warnings` what was dropped from kept
    tools (an unusable output schema)."""

    server_id: str
    title: str
    name: str
    description: str = ""
    domain: str = ""
    tools: list[ToolDoc]
    call_info: dict[str, Any] | None = None
    source: Source
    dropped_tools: list[DroppedTool] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    def tool(self, name: str) -> ToolDoc:
        for t in self.tools:
            if t.name == name:
                return t
        raise KeyError(f"server {self.server_id}: no tool named {name!r}")

    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]

    def openai_tools(self) -> list[dict[str, Any]]:
        return [t.openai_schema() for t in self.tools]


# -- graph --------------------------------------------------------------------------------
class ChainProposal(_Model):
    """One chain an LLM proposed for a server (already checked: every tool exists)."""

    tools: list[str] = Field(min_length=2)
    confidence: float = Field(ge=0.0, le=1.0)
    reason: str = ""


class Edge(_Model):
    source: str
    target: str
    weight: float
    llm: float
    compat: float
    feed: float
    coverage: float
    origin: list[str]
    evidence: list[str] = Field(default_factory=list)


class GraphRecord(Record):
    """A server's graph as data (`graph.py` explains the numbers). `proposal_samples` counts the
    LLM samples the `llm` confidences average over (0: built from schemas alone);
    `proposal_failures` and `dropped_proposals` say what the LLM got wrong."""

    server_id: str
    nodes: list[str]
    edges: list[Edge]
    proposal_samples: int = 0
    proposal_failures: list[str] = Field(default_factory=list)
    dropped_proposals: list[dict[str, Any]] = Field(default_factory=list)

    def to_nx(self):
        g = nx.DiGraph(server_id=self.server_id)
        g.add_nodes_from(self.nodes)
        for e in self.edges:
            g.add_edge(e.source, e.target, **e.model_dump(exclude={"source", "target"}))
        return g


# -- chains -------------------------------------------------------------------------------
class Chain(Record):
    """A sampled chain; the key is a hash of `(server_id, tools)`."""

    server_id: str
    tools: list[str] = Field(min_length=2)
    weight: float = Field(description="product of the walked edges' weights")

    @classmethod
    def create(cls, server_id: str, tools: list[str], weight: float) -> Chain:
        return cls(key=content_id(server_id, list(tools)), server_id=server_id, tools=list(tools), weight=weight)


class Vote(_Model):
    yes: int
    no: int
    abstain: int
    reasons: list[str]

    @property
    def passed(self) -> bool:
        """A strict majority of all samples (abstentions count against)."""
        return self.yes * 2 > self.yes + self.no + self.abstain


class BackTranslation(_Model):
    query: str
    predicted: list[str]
    match: bool


class VerifiedChain(Record):
    server_id: str
    tools: list[str]
    weight: float
    vote: Vote
    back_translation: BackTranslation | None = None


# -- tasks --------------------------------------------------------------------------------
TaskSource = Literal["chain", "server"]
# How a task was written: a base task, or one of its augmentations (`traj.augment`'s modes). Not an
# environment's `env_registry.spec.Variant` (its right behaviour): another word for another thing.
Augmentation = Literal["base", "diverse", "complicate", "persona"]


class TaskSeed(Record):
    """What a batch of tasks is written from: a verified chain (`chain:<id>`) or a server alone
    (`server:<id>`)."""

    server_id: str
    source: TaskSource
    chain_id: str | None = None
    tools: list[str] = Field(default_factory=list)


class Withheld(_Model):
    """What a missing-value task's query leaves out: an argument of its first tool's call, the
    value only its LLM user holds, and what the agent would ask for ("the customer's id")."""

    tool: str
    argument: str
    value: str = Field(min_length=1)
    missing: str = Field(min_length=1)


class Task(Record):
    """A user query. `tools` is what it should need: the chain for chain tasks, the model's own
    list for server-only tasks (1..3). `augmentation` says how it was written; `parent` is the base
    task of an augmented one.

    `behaviour` is its right behaviour, an environment's variant (`env_registry.spec.Variant`; not
    named `variant`, which old records' `augmentation` still answers to); `traj.variants` derives
    the other behaviours from a scored answerable task (`variant_of`): `removed_tool` is the tool a
    declining task does not offer, `withheld` the value a missing-value task's query leaves out.
    These fields came after version 1 without a version change: a record without them reads as the
    answerable task it is.

    `augmentation` was `variant` until 2026-12: records on disk that say `variant` still read (a
    validation alias; the value, and with it the key, is the same), new ones say `augmentation`."""

    server_id: str
    source: TaskSource
    chain_id: str | None = None
    tools: list[str]
    query: str
    augmentation: Augmentation = Field("base", validation_alias=AliasChoices("augmentation", "variant"))
    parent: str | None = None
    persona_id: str | None = None
    prompt: str
    behaviour: Variant = Field(Variant.ANSWERABLE, strict=False)  # read back from its JSON text
    variant_of: str | None = None
    removed_tool: str | None = None
    withheld: Withheld | None = None

    @classmethod
    def create(cls, **fields: Any) -> Task:
        parts = [fields["server_id"], fields["query"], fields.get("augmentation", "base"), fields.get("parent")]
        variant = Variant(fields.get("behaviour", Variant.ANSWERABLE))
        if variant is not Variant.ANSWERABLE:  # an answerable task's key stays what it was before variants
            parts += [variant.value, fields.get("variant_of")]
        return cls(key=content_id(*parts), **fields)

    def offered(self, tools: list[str]) -> list[str]:
        """The tool names the agent is offered out of a server's `tools` (all but `removed_tool`)."""
        return [t for t in tools if t != self.removed_tool]


class AugmentJob(Record):
    """One augmentation of a base task; key `<task key>:<mode>`."""

    task: Task
    mode: Literal["diverse", "complicate", "persona"]


class Scores(_Model):
    question_quality: float
    scenario_realism: float
    tool_necessity: float
    reason: str = ""

    def failing(self, thresholds: dict[str, float]) -> list[str]:
        return [f"{d}={getattr(self, d):g}<{t:g}" for d, t in thresholds.items() if getattr(self, d) < t]


class ScoredTask(Record):
    task: Task
    scores: Scores


class VariantJob(Record):
    """One variant to derive from a scored answerable task; key `<task key>:<variant>`."""

    item: ScoredTask
    variant: Variant = Field(strict=False)


# -- interaction --------------------------------------------------------------------------
class Observation(_Model):
    """What the agent reads for one call: `content`, and the call's status in RL's vocabulary."""

    status: CallStatus
    content: str
    error_kind: str | None = None  # RL's detail: the decoder kind, schema keyword or tool error kind
    injected_failure: bool = False


class TrajectoryCall(_Model):
    """One tool call of an episode. `status` is RL's (`env_registry.call_gate.CallStatus`): ok,
    tool_error (the tool failed, possibly injected), or refused before running: bad_json,
    unknown_tool, schema_error (with `error_kind`, as in RL's call log)."""

    index: int
    turn: int
    id: str
    name: str
    arguments: str
    status: CallStatus
    error_kind: str | None = None
    injected_failure: bool = False
    observation: str


class Trajectory(Record):
    VERSION = 2  # 2: calls carry RL's statuses and refusal wording (1: ok/error/invalid)

    task: Task
    server_id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    calls: list[TrajectoryCall]
    llm_calls: int
    backend: str
    simulator_saw_query: bool | None = None
    final_answer: str


class Judgement(_Model):
    scores: dict[str, float]
    score: float
    reason: str = ""
    overrides: list[str] = Field(default_factory=list)


class JudgedTrajectory(Record):
    VERSION = 2  # holds a Trajectory of version 2
    trajectory: Trajectory
    judgement: Judgement
