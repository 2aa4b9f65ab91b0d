"""The environment spec: one ASTRA RL arena as data (docs/method.md §2.6).

An environment is a main question with its final answer, the question's decomposition into
sub-questions (a DAG over `depends_on`), and for every tool-needing sub-question a tool: an
OpenAI function schema, Python source (model-written, untrusted, executed only in the
sandbox), and golden calls with the output each must produce.

The id is the content hash of the canonical spec (everything but the id and provenance), so
the same environment synthesized twice gets the same id and the store de-duplicates it.

On disk an environment is the JSON of `EnvSpec.to_json()`; `spec_json_schema()` exports the
JSON Schema. `SPEC_VERSION` is bumped on any incompatible change; readers refuse versions they
do not know.
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SPEC_VERSION = 1
_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]")


class ScenarioType(str, Enum):
    """ASTRA's four scenario types of a decomposition trace."""

    SINGLE_HOP = "single_hop"
    MULTI_HOP = "multi_hop"
    PARALLEL_SINGLE_HOP = "parallel_single_hop"
    PARALLEL_MULTI_HOP = "parallel_multi_hop"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=False)


class AnswerRule(_Model):
    """How an answer is recognised inside a text (a tool output or the final answer).

    `auto` treats the answer as numeric when it parses as a number and as text otherwise.
    Text matching is on normalised text (case, whitespace, punctuation at token edges);
    numeric matching accepts any number in the text within the tolerances. `aliases` are
    further accepted spellings. The matching itself lives in `env_registry.matching`.
    """

    kind: Literal["auto", "text", "numeric"] = "auto"
    rel_tol: float = Field(default=1e-4, ge=0)
    abs_tol: float = Field(default=1e-6, ge=0)
    aliases: list[str] = Field(default_factory=list)


class GoldenCall(_Model):
    """A call that must work: `tool(**args)` must produce output that contains `expected`."""

    args: dict[str, Any]
    expected: str


class ToolSpec(_Model):
    """One tool: OpenAI function schema parts, its Python source, its golden calls.

    `source` must define a top-level callable named `name`; the sandbox calls it with the
    call's arguments as keywords. Its return value (JSON for dicts and lists, `str()`
    otherwise) and anything it prints form the tool's output.
    """

    name: str
    description: str
    parameters: dict[str, Any] = Field(description="JSON Schema of the arguments object")
    source: str
    golden_calls: list[GoldenCall] = Field(default_factory=list)

    def openai_schema(self) -> dict[str, Any]:
        """The `{"type": "function", "function": {...}}` form chat templates and verl expect."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def tool_module(tool_name: str, env_id: str, prefix_len: int = 8) -> str:
    """The sandbox module holding a tool's code: `<tool>__<env id prefix>`, non-identifier
    characters replaced by `_`. Every session that runs tools names them so (the rollout, golden
    replay, synthesis): a tool named like a standard module (`statistics`, `json`) never shadows
    it, and two environments' tools with one name never clash (the rollout lengthens the prefix
    when two ids share one)."""
    return f"{_NOT_IDENT.sub('_', tool_name)}__{_NOT_IDENT.sub('_', env_id[:prefix_len])}"


class SubQuestion(_Model):
    """A node of the decomposition trace."""

    id: str
    question: str
    answer: str = Field(description="the value only, as the trace states it")
    depends_on: list[str] = Field(default_factory=list)
    needs_tool: bool = True
    tool: str | None = Field(default=None, description="name of the tool that answers it, when needs_tool")
    hop_level: int | None = None
    match: AnswerRule = Field(default_factory=AnswerRule)


class Provenance(_Model):
    """Where an environment came from; not part of its identity."""

    generator: str = Field(description="e.g. 'astra_env_synth' or 'procedural'")
    model: str | None = None
    prompt_version: str | None = None
    seed: int | None = None
    source: str | None = Field(default=None, description="input record the environment was made from")
    created_at: str | None = None
    scripted: str | None = Field(
        default=None,
        description="the scripted responder or rules file that answered instead of a model (a dry run; "
        "`model` is then None); stores refuse such environments unless told to accept them",
    )


class EnvSpec(_Model):
    """One environment. Build with `EnvSpec.create(...)` to get the id filled in."""

    spec_version: int = SPEC_VERSION
    id: str = ""
    domain: str
    language: str = "en"
    question: str
    final_answer: str
    scenario_type: ScenarioType
    sub_questions: list[SubQuestion]
    tools: list[ToolSpec]
    final_match: AnswerRule = Field(default_factory=AnswerRule)
    provenance: Provenance

    @field_validator("spec_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v != SPEC_VERSION:
            raise ValueError(f"spec_version {v} is not supported (this code reads version {SPEC_VERSION})")
        return v

    # -- identity -------------------------------------------------------------------------
    def canonical_json(self) -> str:
        """The identity-bearing content: everything but `id` and `provenance`, keys sorted."""
        body = self.model_dump(mode="json", exclude={"id", "provenance"})
        return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    def content_hash(self) -> str:
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()[:32]

    @classmethod
    def create(cls, **fields: Any) -> EnvSpec:
        spec = cls(**fields)
        spec.id = spec.content_hash()
        return spec

    def with_id(self) -> EnvSpec:
        return self.model_copy(update={"id": self.content_hash()})

    # -- convenience ----------------------------------------------------------------------
    def tool(self, name: str) -> ToolSpec:
        for t in self.tools:
            if t.name == name:
                return t
        raise KeyError(f"environment {self.id}: no tool named {name!r}")

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> EnvSpec:
        return cls.model_validate_json(text)

    def reward_target(self) -> RewardTarget:
        """What the reward needs to know, and nothing it must not (no tool source)."""
        return RewardTarget(
            env_id=self.id,
            final_answer=self.final_answer,
            final_match=self.final_match,
            sub_questions=[
                TargetSubQuestion(id=q.id, answer=q.answer, needs_tool=q.needs_tool, tool=q.tool, match=q.match)
                for q in self.sub_questions
            ],
        )


class TargetSubQuestion(_Model):
    id: str
    answer: str
    needs_tool: bool
    tool: str | None = None
    match: AnswerRule = Field(default_factory=AnswerRule)


class RewardTarget(_Model):
    """The ground truth a verl row carries (`reward_model.ground_truth`, as JSON)."""

    spec_version: int = SPEC_VERSION
    env_id: str
    final_answer: str
    final_match: AnswerRule = Field(default_factory=AnswerRule)
    sub_questions: list[TargetSubQuestion]


def spec_json_schema() -> dict[str, Any]:
    """JSON Schema of the on-disk environment format."""
    return EnvSpec.model_json_schema()
