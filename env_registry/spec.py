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

Version 2 adds what the reward needs to tell the right call and a committed answer from lucky
ones: `ToolSpec.call_key` (the arguments that identify what a call asks), `GoldenCall.answers`
(the sub-questions a golden call answers) and `AnswerRule.rivals` (the other candidates a
question offers). A version-1 record is a version-2 record without them: it is read as it is,
keeps its id (fields added in version 2 are left out of the JSON while empty), and its reward is
what it was.

Version 3 adds `EnvSpec.answer_type`: the type of the value the final answer's channel carries
(`<answer>...</answer>`, `env_registry.answer_channel`): a number with an optional unit, a name,
a date or a short text. The reward parses the channel in that type and nothing else of the final
answer. A version-2 record has none: its type is inferred from its root answer where that answer
allows (`answer_channel.infer_type`), and it keeps its id (the field is left out while unset).

Version 4 adds `EnvSpec.variant` (issue 49: what the right behaviour is: call then answer, declare
an inability, ask the user for a missing value, answer without a tool) and `EnvSpec.user` (the
scripted user that holds a missing value). Only records carrying a variant other than
`answerable` are written as version 4: an answerable record leaves both fields out and is written
as version 3, so every environment made before keeps its id (`VARIANT_SPEC_VERSION`).
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import Enum
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_serializer, model_validator

from astra_foundation.strict import RecordModel

SPEC_VERSION = 3  # what an answerable record is written as (its id does not change with version 4)
VARIANT_SPEC_VERSION = 4  # a record with a variant other than answerable, or a scripted user
READABLE_SPEC_VERSIONS = (1, 2, 3, 4)
_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]")


class ScenarioType(str, Enum):
    """ASTRA's four scenario types of a decomposition trace."""

    SINGLE_HOP = "single_hop"
    MULTI_HOP = "multi_hop"
    PARALLEL_SINGLE_HOP = "parallel_single_hop"
    PARALLEL_MULTI_HOP = "parallel_multi_hop"


class Variant(str, Enum):
    """What the right behaviour in an environment is (docs/environments.md, "Variants")."""

    ANSWERABLE = "answerable"  # call the tools, then answer in the channel
    UNANSWERABLE = "unanswerable"  # the first step's tool is not offered: no call, a declared inability
    MISSING_VALUE = "missing_value"  # the question leaves out an identifying value: ask the user, then call
    MISSING_FUNCTION = "missing_function"  # the last step's tool is not offered: the earlier calls, then the inability
    NO_TOOL = "no_tool"  # the question states what the answer needs: answer without a call


class AnswerType(str, Enum):
    """The type of an environment's answer: what the answer channel's content must parse to
    (`env_registry.answer_channel` parses each; docs/reward.md lists the accepted forms)."""

    NUMBER = "number"  # one number, an optional unit ("156.33 mm", "USD 1,200.50", "2.15 million")
    NAME = "name"  # one name: a candidate of the question, or a free name (case, accents, punctuation folded)
    DATE = "date"  # one calendar date ("1976-07-20", "July 20, 1976", "20.07.1976", "7/20/1976")
    TEXT = "text"  # a short text or enum value (a weekday, a category), folded as a name is
    # a declared inability naming a capability ("cannot answer: ..."): the type the root of an
    # unanswerable or missing-function environment is read in (never an environment's declared type)
    INABILITY = "inability"


class _Model(RecordModel):
    # Fields added after version 1: written only when set, so a version-1 record dumps (and
    # hashes) exactly as it did.
    _ADDED: ClassVar[tuple[str, ...]] = ()
    # Fields added after version 1 with a non-empty default: written only when they differ from it.
    _LEFT_OUT_AT: ClassVar[dict[str, Any]] = {}

    @model_serializer(mode="wrap")
    def _leave_out_empty_additions(self, handler: Any) -> Any:
        data = handler(self)
        for name in self._ADDED:
            if isinstance(data, dict) and name in data and not data[name]:
                del data[name]
        for name, default in self._LEFT_OUT_AT.items():
            if isinstance(data, dict) and name in data and data[name] in (default, getattr(default, "value", None)):
                del data[name]
        return data


def _check_version(v: int) -> int:
    if v not in READABLE_SPEC_VERSIONS:
        raise ValueError(f"spec_version {v} is not supported (this code reads versions {list(READABLE_SPEC_VERSIONS)})")
    return v


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
    rivals: list[str] = Field(
        default_factory=list,
        description="the other candidates the question offers (a comparison's other entities): a text that "
        "names one of them does not commit to the answer, so it does not contain it",
    )
    _ADDED: ClassVar[tuple[str, ...]] = ("rivals",)


class GoldenCall(_Model):
    """A call that must work: `tool(**args)` must produce output that contains `expected`."""

    args: dict[str, Any]
    expected: str
    answers: list[str] = Field(
        default_factory=list,
        description="ids of the sub-questions this call answers (empty: those of its tool whose answer is `expected`)",
    )
    _ADDED: ClassVar[tuple[str, ...]] = ("answers",)


class CallKey(_Model):
    """The arguments that say what a call of a tool asks: the entity, the key, the modifiers that
    change the result. A call solves a sub-question only if it agrees with the sub-question's
    golden call on these (`env_registry.matching.args_agree`); the other arguments (a page
    size, the fields to return) are the caller's choice."""

    params: list[str]
    unordered: list[list[str]] = Field(
        default_factory=list, description="groups of `params` whose values may come in any order (origin/destination)"
    )
    includes: list[str] = Field(
        default_factory=list, description="list parameters whose value may hold more items than the golden call's"
    )
    defaults: dict[str, Any] = Field(
        default_factory=dict, description="the tool's default of a parameter in `params`, for calls that omit it"
    )


class CallCheck(CallKey):
    """A tool's `CallKey` with the identifying values of a sub-question's golden calls (one of
    them must agree): what the reward checks a call against."""

    golden: list[dict[str, Any]]


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
    call_key: CallKey | None = Field(
        default=None, description="the arguments identifying what a call asks; None: calls are not checked"
    )
    _ADDED: ClassVar[tuple[str, ...]] = ("call_key",)

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


class ScriptedUser(_Model):
    """The user of a missing-value environment: it holds the identifying value the question leaves
    out, gives it when the agent asks (a turn without calls and without an answer channel), and
    says it knows nothing else when asked again (`astra_verl.rollout.hooks.ScriptedUserTurnsHook`)."""

    missing: str = Field(description="what the question leaves out, as the agent would ask for it ('the city')")
    value: str = Field(description="the value the user holds: the golden call's identifying argument")
    reply: str = Field(description="the user's answer to the agent's question; it states `value`")
    otherwise: str = Field(description="the user's answer to any further question")

    def turns(self) -> list[str]:
        """The user turns after the prompt's, in the order the hook delivers them."""
        return [self.reply]


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
    answer_type: AnswerType | None = Field(
        default=None,
        description="the type of the value the final answer's channel carries (None: a version-2 record, "
        "or an environment without sub-questions; the reward then infers it from the root answer)",
    )
    variant: Variant = Field(default=Variant.ANSWERABLE, description="the right behaviour (version 4)")
    user: ScriptedUser | None = Field(default=None, description="the scripted user of a missing-value environment")
    provenance: Provenance
    _ADDED: ClassVar[tuple[str, ...]] = ("answer_type", "user")
    # answerable is the default and what every record before version 4 is: left out, so ids stay
    _LEFT_OUT_AT: ClassVar[dict[str, Any]] = {"variant": Variant.ANSWERABLE.value}

    @field_validator("spec_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        return _check_version(v)

    @model_validator(mode="after")
    def _fields_of_its_version(self) -> EnvSpec:
        rules = [self.final_match, *(q.match for q in self.sub_questions)]
        if self.spec_version < 2 and (
            any(r.rivals for r in rules)
            or any(t.call_key or any(g.answers for g in t.golden_calls) for t in self.tools)
        ):
            raise ValueError("a spec_version 1 record cannot carry rivals, call_key or golden-call answers (version 2)")
        if self.spec_version < 3 and self.answer_type is not None:
            raise ValueError("a spec_version 1 or 2 record cannot carry answer_type (version 3)")
        if self.spec_version < VARIANT_SPEC_VERSION and (self.variant is not Variant.ANSWERABLE or self.user):
            raise ValueError(f"a spec_version {self.spec_version} record cannot carry variant or user (version 4)")
        if (self.user is not None) != (self.variant is Variant.MISSING_VALUE):
            raise ValueError("a scripted user belongs to a missing_value environment, and one needs it")
        if self.answer_type is AnswerType.INABILITY:
            raise ValueError("answer_type 'inability' is the type of a declining root, not an environment's type")
        return self

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
        tools = {t.name: t for t in self.tools}
        return RewardTarget(
            # a variant's target is version 4: a reader of version 3 would judge a declining root in
            # the question's type and never credit it, so it must refuse the row instead
            spec_version=VARIANT_SPEC_VERSION if self.spec_version >= VARIANT_SPEC_VERSION else SPEC_VERSION,
            env_id=self.id,
            final_answer=self.final_answer,
            final_match=self.final_match,
            answer_type=self.answer_type,
            sub_questions=[
                TargetSubQuestion(
                    id=q.id,
                    answer=q.answer,
                    needs_tool=q.needs_tool,
                    tool=q.tool,
                    match=q.match,
                    call_check=_call_check(q, tools.get(q.tool or "")) if q.needs_tool else None,
                    depends_on=list(q.depends_on),
                )
                for q in self.sub_questions
            ],
        )


def _same_answer(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def _call_check(q: SubQuestion, tool: ToolSpec | None) -> CallCheck | None:
    """What a call must pass to solve `q`: its tool's key with the values of the golden calls that
    answer `q` (linked by `answers`; else those expecting `q`'s answer; else all of the tool's)."""
    if tool is None or tool.call_key is None:
        return None
    calls = tool.golden_calls
    golden = [g for g in calls if q.id in g.answers] or [
        g for g in calls if not g.answers and _same_answer(g.expected, q.answer)
    ]
    key = tool.call_key
    values = [
        {p: g.args.get(p, key.defaults.get(p)) for p in key.params if p in g.args or p in key.defaults}
        for g in golden or calls
    ]
    return CallCheck(**key.model_dump(), golden=values)


class TargetSubQuestion(_Model):
    id: str
    answer: str
    needs_tool: bool
    tool: str | None = None
    match: AnswerRule = Field(default_factory=AnswerRule)
    call_check: CallCheck | None = None  # None: any own call of `tool` whose output holds the answer
    # the sub-questions its answer is computed from (a comparison leaf's measurements): a leaf
    # counts only when they were solved in the episode (`astra_verl.calls.solved`)
    depends_on: list[str] = Field(default_factory=list)
    _ADDED: ClassVar[tuple[str, ...]] = ("call_check", "depends_on")


class RewardTarget(_Model):
    """The ground truth a verl row carries (`reward_model.ground_truth`, as JSON)."""

    spec_version: int = SPEC_VERSION
    env_id: str
    final_answer: str
    final_match: AnswerRule = Field(default_factory=AnswerRule)
    # the type the answer channel's content is parsed in (None: inferred from the root answer)
    answer_type: AnswerType | None = None
    sub_questions: list[TargetSubQuestion]
    _ADDED: ClassVar[tuple[str, ...]] = ("answer_type",)

    @field_validator("spec_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        return _check_version(v)


def spec_json_schema() -> dict[str, Any]:
    """JSON Schema of the on-disk environment format."""
    return EnvSpec.model_json_schema()
