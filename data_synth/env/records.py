"""The records of environment synthesis, one per step boundary (docs/method.md §2).

    Seed --decompose--> QA --necessity--> Labeled --verify--> Scored --select--> Selected
         --tools--> Tooled --merge--> Merged (a validated EnvSpec) --publish--> Published

Each record extends the previous one, so any record carries the whole history of its
instance. The trace keeps ASTRA's fields under our names: `_uuid` -> `id`, `sub_question`
-> `question`, `sub_answer` -> `answer`, `dependency` (null | ids) -> `depends_on` (list),
`hop_level`, `is_parallel`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from data_synth.pipeline import Record

Mode = Literal["domain", "context", "question", "taxonomy"]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Seed(Record):
    """One input of the decompose step: a domain, a passage, a question or a taxonomy leaf."""

    mode: Mode
    domain: str
    text: str = Field(description="knowledge corpus / passage / question / category description")
    category: str | None = Field(default=None, description="taxonomy mode: the leaf's name")
    examples: list[str] = Field(default_factory=list, description="taxonomy mode: example requests")
    language: str = "en"
    hop_min: int
    hop_max: int
    target_type: str | None = Field(default=None, description="scenario type asked for (domain, taxonomy modes)")
    source: str = Field(description="file:line of the input")
    sample: int = 0


class TraceNode(_Part):
    id: str
    question: str
    answer: str
    depends_on: list[str] = Field(default_factory=list)
    hop_level: int
    is_parallel: bool = False


class QA(Record):
    """A main question, its answer and its decomposition trace (output of decompose)."""

    seed: Seed
    question: str
    final_answer: str
    claimed_scenario_type: str | None = None
    nodes: list[TraceNode]
    notes: list[str] = Field(default_factory=list, description="repairs applied to the model's trace")
    model: str = ""
    prompts: dict[str, str] = Field(default_factory=dict, description="step -> prompt tag (name@version)")

    def node(self, node_id: str) -> TraceNode:
        return next(n for n in self.nodes if n.id == node_id)


class Necessity(_Part):
    needs_tool: bool
    reason: str = ""


class Labeled(QA):
    """QA with a tool-necessity label per node; legitimate (non-tool nodes are leaves)."""

    necessity: dict[str, Necessity]

    def tool_nodes(self) -> list[TraceNode]:
        return [n for n in self.nodes if self.necessity[n.id].needs_tool]


class JudgeScores(_Part):
    dependency: float
    atomicity: float
    sequential: float
    completeness: float
    issues: dict[str, list[str]] = Field(default_factory=dict, description="judge -> what it found wrong")

    @property
    def mean(self) -> float:
        return (self.dependency + self.atomicity + self.sequential + self.completeness) / 4


class Scored(Labeled):
    scores: JudgeScores
    quality: float


class Selected(Scored):
    threshold: float
    population: int = Field(description="how many scores the threshold was computed over")


class BuiltTool(_Part):
    """The verified tool of one tool-needing node."""

    node_id: str
    name: str
    description: str
    parameters: dict[str, Any]
    source: str
    call: str = Field(description="the call statement as the model wrote it")
    args: dict[str, Any]
    output: str = Field(description="what the call returned in the sandbox check")
    outer_attempts: int
    inner_attempts: int
    scaled: bool


class Tooled(Selected):
    tools: list[BuiltTool]


class Merged(Record):
    """A finished environment: validated structure, every golden call re-run on the final tools."""

    env: dict[str, Any] = Field(description="EnvSpec JSON (env_registry.spec)")
    clusters: list[list[str]]
    merge_attempts: dict[str, int] = Field(default_factory=dict, description="cluster base id -> tries")


class Published(Record):
    env_id: str
    new: bool = Field(description="False when the store already held this environment")
    domain: str
    scenario_type: str
    sub_questions: int
    tools: int
