"""ASTRA's released environment data, read into `EnvSpec`s (or checked, where it cannot be).

Two record formats, told apart by their fields (`convert` picks the adapter from `FORMATS`):

`pipeline`: a record of ASTRA's environment-synthesis pipeline after step 4 (environment
synthesis) or step 5 (tool merging), as its README documents them:

    main_question -> question           final_answer -> final_answer
    decomposition_trace[k]              -> a sub-question: `_uuid` -> id, `sub_question`,
                                           `sub_answer`, `tool_necessity` (default true, as
                                           step 4 reads it) -> needs_tool, `dependency` (null,
                                           one `_uuid` or a list of them) -> depends_on
    env_result[_uuid].env_synthesis_result.data
        tool_document                   -> the tool's name, description and parameters (an
                                           object, JSON text, or OpenAI's {"type": "function",
                                           "function": ...} wrapper)
        code                            -> its source (run only in the sandbox, by validation)
        tool_call_statement             -> a golden call: parsed with `env_registry.calls` (ast,
                                           literals only, never evaluated; positional arguments
                                           named from the code's `def`)
    expected output of the golden call  -> the sub-answer: what ASTRA's own sandbox check
                                           looks for in the call's printed output

`tool_call_ans` is not used as the expected output: it is `print()` of the return value
(Python's repr, where our sandbox renders JSON), and step 5 leaves the pre-merge output there.
Entries that share a name, a document and code (step 5's merged tools) become one tool with a
golden call per sub-question; a name shared by different documents or code stays two tools,
which validation rejects (`tool_names_unique`). ASTRA's `hop_level`s are not carried: validation
derives levels from the dependencies (the stated ones are often off by one and checked
nowhere). The scenario type is the one the trace's shape implies (`env_registry.shape`); the
language is zh when the question has CJK characters, else en; the domain is the record's
`domain`, else the importer's default.

`rl_1k`: a row of the ASTRA-RL-1k release: `prompt` (chat messages), `tool_schema` (OpenAI
tools), `tool_dict` ({name: code}), `sub_qa_dict` ({tool: [answers]}), the last three as JSON
text. These rows carry no call statements (nor sub-question texts or a final answer): a row is
checked (tool names unique, schemas, code that parses and defines its tool with a fitting
signature, every target tool listed and implemented), its defects listed before the missing
calls; a sound row is handed on (`Conversion.rl_row`) to golden-call recovery
(`env_registry.recovery`), which imports it when every call is found
(`env_registry.importers.astra_rl`).

`synthesis_input`: what ASTRA's repository releases as data (`env_synthesis/data/`) is the
pipeline's input, not environments: knowledge domains and context passages (`{domain,
knowledge_corpus}`), questions (`{question, domain}`), a taxonomy. Such a record is rejected
with the `data_synth env run` command that synthesizes environments from it, so a user who
points the importer at those files learns what they hold; an SFT conversation (ASTRA-SFT-1k) is
rejected with the command that converts it (`data_synth traj import-astra`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from env_registry.answer_channel import inferred_type
from env_registry.calls import CallStatementError, def_parameters, parse_call_statement
from env_registry.importers.sources import decode_json_text, has_fields
from env_registry.shape import classify, shape_of
from env_registry.spec import EnvSpec, GoldenCall, Provenance, ScenarioType, SubQuestion, ToolSpec
from env_registry.structure import Rule, ValidationIssue, check_tool

GENERATOR = "astra_import"
DEFAULT_DOMAIN = "astra"
_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_NO_DEPENDENCY = (None, "", "null", "None")


@dataclass
class Conversion:
    """One record read: the environment (None when it could not be built) and what is wrong
    with it so far (structural validation and replay come after)."""

    format: str
    spec: EnvSpec | None
    issues: list[ValidationIssue] = field(default_factory=list)
    rl_row: RlRow | None = None  # an ASTRA-RL-1k row sound but for its missing calls (recovery's input)


class _External(BaseModel):
    # ASTRA's records carry many fields this reads nothing from (verify scores, extra_info,
    # clusters, aggregated_env, ...): they are ignored, not refused.
    model_config = ConfigDict(extra="ignore")


class _TraceItem(_External):
    uuid: int | str = Field(alias="_uuid")
    sub_question: str
    sub_answer: str | int | float
    dependency: Any = None
    tool_necessity: bool = True


class _SynthData(_External):
    tool_document: dict[str, Any] | str | None = None
    tool_call_statement: str | None = None
    code: str | None = None


class _Synth(_External):
    data: _SynthData


class _EnvEntry(_External):
    env_synthesis_result: _Synth | None = None


class PipelineRecord(_External):
    """The fields of a step-4/step-5 record that become the environment."""

    uuid: Any = None
    domain: str | None = None
    main_question: str
    final_answer: str | int | float = ""
    decomposition_trace: list[_TraceItem]
    env_result: dict[str, _EnvEntry | None] = Field(default_factory=dict)


class _Issues(list):
    def add(self, path: str, rule: Rule, message: str) -> None:
        self.append(ValidationIssue("", path, rule, message))


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _format_issues(exc: ValidationError, prefix: str = "") -> list[ValidationIssue]:
    return [
        ValidationIssue("", prefix + _loc(err["loc"]), Rule.IMPORT_FORMAT, err["msg"])
        for err in exc.errors(include_url=False)
    ]


def _dependencies(raw: Any, path: str, out: _Issues) -> list[str]:
    if raw in _NO_DEPENDENCY or raw == []:
        return []
    if isinstance(raw, (int, str)) and not isinstance(raw, bool):
        return [str(raw)]
    if isinstance(raw, list) and all(isinstance(d, (int, str)) and not isinstance(d, bool) for d in raw):
        return [str(d) for d in raw]
    out.add(path, Rule.IMPORT_FORMAT, f"`dependency` must be null, a `_uuid` or a list of them, got {raw!r}")
    return []


def tool_document(raw: Any, path: str, out: _Issues) -> dict[str, Any] | None:
    """{name, description, parameters} of a tool document, or None (with an issue)."""
    try:
        doc = decode_json_text(raw, path)
    except ValueError as exc:
        out.add(path, Rule.IMPORT_FORMAT, str(exc))
        return None
    if isinstance(doc, dict) and isinstance(doc.get("function"), dict):
        doc = doc["function"]
    wanted = {"name": str, "description": str, "parameters": dict}
    wrong = [k for k, kind in wanted.items() if not isinstance(doc, dict) or not isinstance(doc.get(k), kind)]
    if wrong:
        got = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        out.add(
            path,
            Rule.IMPORT_FORMAT,
            f"a tool document needs name, description (text) and parameters (an object); {wrong} missing or of the wrong type in {got}",
        )
        return None
    return {k: doc[k] for k in wanted}


def _language(text: str) -> str:
    return "zh" if _CJK.search(text) else "en"


# -- pipeline records ------------------------------------------------------------------------


@dataclass
class _ToolUse:
    """The synthesized tool of one sub-question and its parsed call."""

    question_id: str
    doc: dict[str, Any]
    code: str
    args: dict[str, Any] | None  # None: the call statement was unusable (an issue says why)
    answer: str


def _tool_use(item: _TraceItem, entry: _EnvEntry | None, path: str, out: _Issues) -> _ToolUse | None:
    if entry is None or entry.env_synthesis_result is None:
        return None  # synthesis failed for it; validation reports the tool-less sub-question
    data = entry.env_synthesis_result.data
    where = f"{path}.env_synthesis_result.data"
    doc = tool_document(data.tool_document, f"{where}.tool_document", out)
    if doc is None:
        return None
    code = data.code or ""
    args = None
    statement = data.tool_call_statement
    if not statement or not statement.strip():
        out.add(f"{where}.tool_call_statement", Rule.CALL_STATEMENT, "there is no call statement to replay")
    else:
        try:
            _, args = parse_call_statement(statement, name=doc["name"], positional=def_parameters(code, doc["name"]))
        except CallStatementError as exc:
            out.add(f"{where}.tool_call_statement", Rule.CALL_STATEMENT, f"{statement[:200]!r}: {exc}")
    return _ToolUse(str(item.uuid), doc, code, args, str(item.sub_answer))


def _tools(uses: list[_ToolUse]) -> tuple[list[ToolSpec], dict[str, str]]:
    """Tools in first-use order (one per distinct name+document+code) and sub-question -> tool name."""
    tools: list[ToolSpec] = []
    index: dict[tuple[str, str, str], int] = {}
    tool_of: dict[str, str] = {}
    for use in uses:
        key = (use.doc["name"], json.dumps(use.doc, sort_keys=True, ensure_ascii=False), use.code)
        if key not in index:
            index[key] = len(tools)
            tools.append(
                ToolSpec(
                    name=use.doc["name"],
                    description=use.doc["description"],
                    parameters=use.doc["parameters"],
                    source=use.code,
                )
            )
        if use.args is not None:
            tools[index[key]].golden_calls.append(GoldenCall(args=use.args, expected=use.answer))
        tool_of[use.question_id] = use.doc["name"]
    return tools, tool_of


def _scenario_type(spec: EnvSpec) -> ScenarioType:
    """The type the trace's shape implies; a cyclic or tool-less trace keeps a placeholder
    (validation rejects it by dag_acyclic / has_tool_node)."""
    try:
        shape = shape_of(spec)
    except nx.NetworkXUnfeasible:
        return spec.scenario_type
    return classify(shape.tool_nodes, shape.hops) or spec.scenario_type


def from_pipeline(data: dict[str, Any], source: str, domain: str = DEFAULT_DOMAIN) -> Conversion:
    """A step-4/step-5 record as an environment (see the module docstring for the mapping)."""
    try:
        rec = PipelineRecord.model_validate(data)
    except ValidationError as exc:
        return Conversion("pipeline", None, _format_issues(exc))
    out = _Issues()
    sub_questions, uses = [], []
    for k, item in enumerate(rec.decomposition_trace):
        qid = str(item.uuid)
        depends_on = _dependencies(item.dependency, f"decomposition_trace[{k}].dependency", out)
        use = _tool_use(item, rec.env_result.get(qid), f"env_result[{qid!r}]", out) if item.tool_necessity else None
        if use is not None:
            uses.append(use)
        sub_questions.append((qid, item, depends_on))
    tools, tool_of = _tools(uses)
    spec = EnvSpec(
        domain=rec.domain or domain,
        language=_language(rec.main_question),
        question=rec.main_question,
        final_answer=str(rec.final_answer),
        scenario_type=ScenarioType.MULTI_HOP,
        sub_questions=[
            SubQuestion(
                id=qid,
                question=item.sub_question,
                answer=str(item.sub_answer),
                depends_on=depends_on,
                needs_tool=item.tool_necessity,
                tool=tool_of.get(qid),
            )
            for qid, item, depends_on in sub_questions
        ],
        tools=tools,
        provenance=Provenance(generator=GENERATOR, source=source if rec.uuid is None else f"{source} uuid={rec.uuid}"),
    )
    spec = spec.model_copy(update={"scenario_type": _scenario_type(spec), "answer_type": inferred_type(spec)}).with_id()
    return Conversion("pipeline", spec, [ValidationIssue(spec.id, i.field, i.rule, i.message) for i in out])


# -- ASTRA-RL-1k rows ------------------------------------------------------------------------


def _rl_fields(data: dict[str, Any], out: _Issues) -> tuple[str, list[Any], dict[str, Any], dict[str, Any]] | None:
    decoded = {}
    for name, kind in (("prompt", list), ("tool_schema", list), ("tool_dict", dict), ("sub_qa_dict", dict)):
        try:
            value = decode_json_text(data.get(name), name)
        except ValueError as exc:
            out.add(name, Rule.IMPORT_FORMAT, str(exc))
            continue
        if not isinstance(value, kind):
            out.add(
                name,
                Rule.IMPORT_FORMAT,
                f"must be a JSON {kind.__name__} (as JSON text or native), got {type(value).__name__}",
            )
            continue
        decoded[name] = value
    if len(decoded) < 4:
        return None
    users = [m.get("content") for m in decoded["prompt"] if isinstance(m, dict) and m.get("role") == "user"]
    question = users[-1] if users and isinstance(users[-1], str) else ""
    if not question.strip():
        out.add("prompt", Rule.NON_EMPTY, "the prompt has no user message with text")
    return question, decoded["tool_schema"], decoded["tool_dict"], decoded["sub_qa_dict"]


def _task_text(prompt: list[Any]) -> str:
    """What recovery reads argument values from: the user turns, and a system turn that carries a
    background (JSON); a generic system instruction would only add decoy words."""
    texts = []
    for m in prompt:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, str) and (m.get("role") == "user" or "{" in content):
            texts.append(content)
    return "\n".join(texts)


def _rl_tools(schemas: list[Any], code: dict[str, Any], out: _Issues) -> list[str]:
    """Names of the row's tools; issues for repeated names first (the root of what follows: a
    name-indexed tool_dict keeps one implementation for both), then each tool's own defects."""
    docs = [(i, tool_document(raw, f"tool_schema[{i}]", out)) for i, raw in enumerate(schemas)]
    first: dict[str, int] = {}
    for i, doc in docs:
        if doc is None:
            continue
        if doc["name"] in first:
            out.add(
                f"tool_schema[{i}].name",
                Rule.TOOL_NAMES_UNIQUE,
                f"tool name {doc['name']!r} is also used by tool_schema[{first[doc['name']]}]; "
                "a name-indexed tool_dict keeps one implementation for both",
            )
        else:
            first[doc["name"]] = i
    for i, doc in docs:
        if doc is None or first[doc["name"]] != i:
            continue
        source = code.get(doc["name"])
        if not isinstance(source, str) or not source.strip():
            out.add(
                f"tool_dict[{doc['name']!r}]",
                Rule.NON_EMPTY,
                f"tool_schema[{i}] {doc['name']!r} has no code in tool_dict",
            )
            continue
        tool = ToolSpec(name=doc["name"], description=doc["description"], parameters=doc["parameters"], source=source)
        for issue in check_tool(tool):
            out.add(issue.field.replace("tools[0]", f"tool_schema[{i}]", 1), issue.rule, issue.message)
    for name in code:
        if name not in first:
            out.add(
                f"tool_dict[{name!r}]",
                Rule.TOOL_EXISTS,
                f"tool_dict has code for {name!r}, which tool_schema does not list",
            )
    return list(first)


@dataclass
class RlRow:
    """A sound ASTRA-RL-1k row: its task, its tools (with their code) and the answers each
    tool's calls must produce; what golden-call recovery (`env_registry.recovery`) starts from."""

    question: str
    text: str  # the task text argument values are read from (user turns, a background)
    tools: list[ToolSpec]
    targets: dict[str, list[str]]


def read_rl_row(data: dict[str, Any]) -> tuple[RlRow | None, list[ValidationIssue]]:
    """The row, or None and every defect it has (the missing calls are not a defect here)."""
    out = _Issues()
    fields = _rl_fields(data, out)
    if fields is None:
        return None, list(out)
    question, schemas, code, targets = fields
    names = _rl_tools(schemas, code, out)
    for tool, answers in targets.items():
        answers = [answers] if isinstance(answers, str) else answers
        if tool not in names:
            out.add(
                f"sub_qa_dict[{tool!r}]",
                Rule.TOOL_EXISTS,
                f"answers are expected from {tool!r}, which tool_schema does not list",
            )
        if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a.strip() for a in answers):
            out.add(
                f"sub_qa_dict[{tool!r}]", Rule.NON_EMPTY, f"must be a non-empty list of answer texts, got {answers!r}"
            )
    if out:
        return None, list(out)
    docs = [tool_document(raw, "", out) for raw in schemas]
    tools = [
        ToolSpec(name=d["name"], description=d["description"], parameters=d["parameters"], source=code[d["name"]])
        for d in docs
        if d is not None
    ]
    wanted = {t: [a] if isinstance(a, str) else list(a) for t, a in targets.items()}
    return RlRow(question, _task_text(decode_json_text(data["prompt"], "prompt")), tools, wanted), []


def check_rl_row(data: dict[str, Any]) -> Conversion:
    """Every defect of an ASTRA-RL-1k row, then the reason it cannot be imported as it is (no
    calls). A sound row is carried in `Conversion.rl_row`: golden-call recovery may import it."""
    row, issues = read_rl_row(data)
    fields = _rl_fields(data, _Issues())
    if fields is None:
        return Conversion("rl_1k", None, issues)
    out = _Issues()
    out.add(
        "sub_qa_dict",
        Rule.GOLDEN_PRESENT,
        f"ASTRA-RL-1k rows release no call statements (nor sub-question texts or a final answer), so the answers "
        f"of {sorted(fields[3])} cannot be replayed and the row cannot be verified until its golden calls are "
        "recovered (`env_registry recover-calls`; import-astra recovers them unless --no-recovery)",
    )
    return Conversion("rl_1k", None, issues + list(out), rl_row=row)


# -- inputs of ASTRA's synthesis, not environments ----------------------------------------------


def _is_taxonomy(data: dict[str, Any]) -> bool:
    """{category: {leaf: {description, examples}}}, nested to any depth (ASTRA's taxonomy mode)."""
    return bool(data) and all(isinstance(v, dict) and ("description" in v or _is_taxonomy(v)) for v in data.values())


def _synthesis_mode(data: dict[str, Any]) -> str:
    if "knowledge_corpus" in data:
        return "context" if str(data["knowledge_corpus"]).strip() else "domain"
    return "question" if "question" in data else "taxonomy"


def synthesis_input(data: dict[str, Any]) -> Conversion:
    """A record ASTRA's environment synthesis starts from (a knowledge domain, a context passage,
    a question, a taxonomy): no tools yet, so nothing to import; the issue names the command that
    synthesizes environments from it."""
    mode = _synthesis_mode(data)
    message = (
        f"an input of ASTRA's environment synthesis ({mode} mode: {sorted(data)[:6]}), not an environment: it has "
        f"no tools or calls yet; synthesize environments from the file with "
        f"`python -m data_synth env run --mode {mode} --input FILE`, or import the pipeline's step 4/5 output"
    )
    return Conversion(f"synthesis_input ({mode})", None, [ValidationIssue("", "", Rule.IMPORT_FORMAT, message)])


def conversation(data: dict[str, Any]) -> Conversion:
    """An SFT conversation (ASTRA-SFT-1k, OpenAI messages): the other importer's input."""
    message = (
        "an SFT conversation (ASTRA-SFT-1k or OpenAI messages), not an environment: convert it with "
        "`python -m data_synth traj import-astra FILE --output-file sft.parquet`"
    )
    return Conversion("sft_conversation", None, [ValidationIssue("", "", Rule.IMPORT_FORMAT, message)])


# -- dispatch --------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordFormat:
    name: str
    detect: Callable[[dict[str, Any]], bool]
    convert: Callable[[dict[str, Any], str, str], Conversion]


FORMATS = (
    RecordFormat("pipeline", has_fields("decomposition_trace"), from_pipeline),
    RecordFormat(
        "rl_1k", has_fields("tool_schema", "tool_dict", "sub_qa_dict"), lambda d, source, domain: check_rl_row(d)
    ),
    RecordFormat(
        "synthesis_input",
        lambda d: has_fields("domain", "knowledge_corpus")(d) or has_fields("domain", "question")(d) or _is_taxonomy(d),
        lambda d, source, domain: synthesis_input(d),
    ),
    RecordFormat(
        "sft_conversation",
        lambda d: has_fields("trajectory", "mcp_info")(d) or has_fields("messages", "tools")(d),
        lambda d, source, domain: conversation(d),
    ),
)


def convert(data: dict[str, Any], source: str, domain: str = DEFAULT_DOMAIN) -> Conversion:
    """The record read by the first format whose fields it has; an `import_format` issue when none."""
    for fmt in FORMATS:
        if fmt.detect(data):
            return fmt.convert(data, source, domain)
    return Conversion(
        "unknown",
        None,
        [
            ValidationIssue(
                "",
                "",
                Rule.IMPORT_FORMAT,
                f"not an ASTRA record: expected `decomposition_trace` (pipeline step 4/5 output) or "
                f"`tool_schema`, `tool_dict` and `sub_qa_dict` (ASTRA-RL-1k); found {sorted(data)[:12]}",
            )
        ],
    )
