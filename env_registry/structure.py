"""The structural rules of an environment: pure and fast, no code is executed.

`check_structure(env)` returns every `ValidationIssue` of an environment, not just the first.
Each issue names the rule it breaks (`Rule`, stable strings that are logged and counted) and
the field, as a path into the spec (`sub_questions[2].depends_on[0]`).

Rules (the replay rules `replay_error`, `replay_mismatch` and `determinism` are checked by
`env_registry.validate`, which runs the golden calls in the sandbox):
- parse                 the record is not a valid EnvSpec (JSON or field types; `parse_record`)
- id_hash               `id` equals the content hash (`EnvSpec.content_hash()`)
- non_empty             question, final answer, sub-question texts/answers, tool descriptions and sources
- sub_question_ids_unique
- dependency_exists     every `depends_on` id names a sub-question
- dag_acyclic           the trace has no cycle (a self-dependency is one)
- non_tool_leaf         nothing depends on a sub-question that needs no tool (docs/method.md §2.2)
- hop_level             a stated `hop_level` is 1 + the largest hop level of its dependencies
- has_tool_node         at least one sub-question needs a tool
- tool_name_identifier  tool names are ASCII Python identifiers, not keywords, <= 64 characters
- tool_names_unique
- tool_schema_valid     `parameters` passes jsonschema's meta-schema check
- tool_parameters_object  `parameters` is an object schema (`"type": "object"`)
- tool_source_syntax    the source parses (checked with `ast`, never executed here)
- tool_source_defines   the source defines a top-level callable with the tool's name (a plain def, not async)
- tool_signature        the def accepts every schema property as a keyword and needs nothing the schema lacks
- tool_assignment       `needs_tool` <=> `tool` is set
- tool_exists           a sub-question's tool is one of the environment's tools
- golden_present        every tool a sub-question uses has a golden call
- golden_args_schema    golden-call arguments validate against the tool's parameters schema
- golden_covers_answer  some golden call of a sub-question's tool expects an output containing its answer
- golden_answers        a golden call's `answers` name sub-questions that use its tool
- call_key              a tool's `call_key` names parameters of its schema (groups, lists and defaults
                        among them), so the reward can check a call's identifying arguments
- scenario_type         the declared type matches the trace's shape (`env_registry.shape`)
- answer_type           the root's answer parses as one value of the environment's answer type
                        and states itself in it (undeclared: its answer parses in some type), so the
                        answer channel can carry it (`env_registry.answer_channel`)
- variant               the environment keeps its variant's rules (`env_registry.variants`: a declining
                        root for unanswerable / missing_function, no tool sub-question for no_tool, a
                        scripted user holding a first step's argument the question leaves out); the
                        trace's shape (has_tool_node, scenario_type) is checked where the variant keeps it
- import_format         an imported record lacks a field, or has one of the wrong type (importers)
- call_statement        an imported call statement is not one call with literal arguments (importers)
"""

from __future__ import annotations

import ast
import json
import keyword
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import networkx as nx
from pydantic import ValidationError

from env_registry.answer_channel import channel, judge, root_question, type_of
from env_registry.arguments import argument_validator, schema_error
from env_registry.matching import answer_in_text
from env_registry.shape import classify, shape_of
from env_registry.spec import EnvSpec, ToolSpec
from env_registry.variants import VARIANTS, variant_problems


class Rule(str, Enum):
    PARSE = "parse"
    ID_HASH = "id_hash"
    NON_EMPTY = "non_empty"
    SUB_QUESTION_IDS_UNIQUE = "sub_question_ids_unique"
    DEPENDENCY_EXISTS = "dependency_exists"
    DAG_ACYCLIC = "dag_acyclic"
    NON_TOOL_LEAF = "non_tool_leaf"
    HOP_LEVEL = "hop_level"
    HAS_TOOL_NODE = "has_tool_node"
    TOOL_NAME_IDENTIFIER = "tool_name_identifier"
    TOOL_NAMES_UNIQUE = "tool_names_unique"
    TOOL_SCHEMA_VALID = "tool_schema_valid"
    TOOL_PARAMETERS_OBJECT = "tool_parameters_object"
    TOOL_SOURCE_SYNTAX = "tool_source_syntax"
    TOOL_SOURCE_DEFINES = "tool_source_defines"
    TOOL_SIGNATURE = "tool_signature"
    TOOL_ASSIGNMENT = "tool_assignment"
    TOOL_EXISTS = "tool_exists"
    GOLDEN_PRESENT = "golden_present"
    GOLDEN_ARGS_SCHEMA = "golden_args_schema"
    GOLDEN_COVERS_ANSWER = "golden_covers_answer"
    GOLDEN_ANSWERS = "golden_answers"
    CALL_KEY = "call_key"
    SCENARIO_TYPE = "scenario_type"
    ANSWER_TYPE = "answer_type"
    VARIANT = "variant"
    REPLAY_ERROR = "replay_error"
    REPLAY_MISMATCH = "replay_mismatch"
    DETERMINISM = "determinism"
    IMPORT_FORMAT = "import_format"
    CALL_STATEMENT = "call_statement"


@dataclass(frozen=True)
class ValidationIssue:
    env_id: str
    field: str  # path into the spec, e.g. "sub_questions[2].depends_on[0]"
    rule: Rule
    message: str
    golden_call: tuple[int, int] | None = None  # (tool index, golden-call index) of a replay issue about one call

    def __str__(self) -> str:
        return f"{self.env_id or '<no id>'} {self.field}: [{self.rule.value}] {self.message}"

    def to_dict(self) -> dict[str, str]:
        return {"env_id": self.env_id, "field": self.field, "rule": self.rule.value, "message": self.message}


_MAX_TOOL_NAME = 64  # OpenAI function-name limit


class Issues(list):
    """The issues of one environment as they are found (`add` names the field, the rule and why)."""

    def __init__(self, env_id: str):
        super().__init__()
        self.env_id = env_id

    def add(self, path: str, rule: Rule, message: str, golden_call: tuple[int, int] | None = None) -> None:
        self.append(ValidationIssue(self.env_id, path, rule, message, golden_call))


# -- structure -----------------------------------------------------------------------------


def check_structure(env: EnvSpec) -> list[ValidationIssue]:
    """Every structural issue of `env` (no code is executed)."""
    out = Issues(env.id)
    _check_identity(env, out)
    _check_text(env, out)
    acyclic = _check_trace(env, out)
    tools = _check_tools(env, out)
    _check_assignment(env, tools, out)
    if acyclic and VARIANTS[env.variant].tool_shape:
        _check_shape(env, out)
    if env.sub_questions and all(q.answer.strip() for q in env.sub_questions) and env.final_answer.strip():
        _check_answer_type(env, out)
        for path, why in variant_problems(env):
            out.add(path, Rule.VARIANT, why)
    return list(out)


def _check_answer_type(env: EnvSpec, out: Issues) -> None:
    """The root's answer is one value of the environment's answer type: the reward reads the root
    from the answer channel in that type, so an answer that does not parse in it is never credited."""
    target = env.reward_target()
    root = root_question(target)
    answer_type = type_of(target, root)
    if answer_type is None:
        out.add(
            "answer_type",
            Rule.ANSWER_TYPE,
            f"no answer type is declared and the root's answer {root.answer!r} parses in none (one number, "
            "name, date or short text); declare `answer_type` and state the root's answer as one value of it",
        )
        return
    verdict = judge(channel(root.answer), root.answer, root.match, answer_type)
    if not verdict.counted:
        out.add(
            "answer_type",
            Rule.ANSWER_TYPE,
            f"the root's answer {root.answer!r} does not parse as one {answer_type.value} ({verdict.why}); "
            "fix the answer or the declared `answer_type`",
        )


def _check_identity(env: EnvSpec, out: Issues) -> None:
    digest = env.content_hash()
    if env.id != digest:
        what = "is empty" if not env.id else f"{env.id!r} is not"
        out.add(
            "id",
            Rule.ID_HASH,
            f"id {what} the content hash {digest!r}; build specs with EnvSpec.create(...) or .with_id() after edits",
        )


def _check_text(env: EnvSpec, out: Issues) -> None:
    checks = [("question", env.question), ("final_answer", env.final_answer)]
    for i, q in enumerate(env.sub_questions):
        checks += [(f"sub_questions[{i}].question", q.question), (f"sub_questions[{i}].answer", q.answer)]
    _check_non_empty(checks, out)


def _check_non_empty(checks: list[tuple[str, str]], out: Issues) -> None:
    for path, text in checks:
        if not text.strip():
            out.add(path, Rule.NON_EMPTY, "must not be empty")


def _check_trace(env: EnvSpec, out: Issues) -> bool:
    """Ids, dependencies, cycles, non-tool leaves, hop levels. True when the trace is a DAG."""
    index: dict[str, int] = {}
    for i, q in enumerate(env.sub_questions):
        if q.id in index:
            out.add(
                f"sub_questions[{i}].id",
                Rule.SUB_QUESTION_IDS_UNIQUE,
                f"id {q.id!r} is also used by sub_questions[{index[q.id]}]",
            )
        else:
            index[q.id] = i
    g = nx.DiGraph()
    g.add_nodes_from(index)
    for i, q in enumerate(env.sub_questions):
        for j, dep in enumerate(q.depends_on):
            if dep not in index:
                out.add(
                    f"sub_questions[{i}].depends_on[{j}]",
                    Rule.DEPENDENCY_EXISTS,
                    f"{q.id!r} depends on {dep!r}, which is not a sub-question id (ids: {sorted(index)})",
                )
            else:
                g.add_edge(dep, q.id)
    acyclic = True
    for scc in nx.strongly_connected_components(g):
        if len(scc) > 1 or any(g.has_edge(n, n) for n in scc):
            acyclic = False
            members = sorted(scc, key=index.__getitem__)
            cycle = " -> ".join([*members, members[0]]) if len(members) > 1 else f"{members[0]} -> {members[0]}"
            out.add(
                f"sub_questions[{index[members[0]]}].depends_on",
                Rule.DAG_ACYCLIC,
                f"dependencies form a cycle ({cycle}); the trace must be a DAG",
            )
    for q in env.sub_questions:
        if not q.needs_tool and q.id in index:
            dependents = sorted(g.successors(q.id))
            if dependents:
                out.add(
                    f"sub_questions[{index[q.id]}]",
                    Rule.NON_TOOL_LEAF,
                    f"{q.id!r} needs no tool but {dependents} depend on it; steps without a tool may only be leaves",
                )
    if acyclic:
        level: dict[str, int] = {}
        for node in nx.topological_sort(g):
            level[node] = 1 + max((level[p] for p in g.predecessors(node)), default=0)
        for i, q in enumerate(env.sub_questions):
            if q.hop_level is not None and index.get(q.id) == i and q.hop_level != level[q.id]:
                out.add(
                    f"sub_questions[{i}].hop_level",
                    Rule.HOP_LEVEL,
                    f"hop_level is {q.hop_level} but its dependencies put {q.id!r} at level {level[q.id]}",
                )
    return acyclic


def _check_tools(env: EnvSpec, out: Issues) -> dict[str, ToolSpec]:
    seen: dict[str, int] = {}
    for i, t in enumerate(env.tools):
        if t.name in seen:
            out.add(
                f"tools[{i}].name",
                Rule.TOOL_NAMES_UNIQUE,
                f"tool name {t.name!r} is also used by tools[{seen[t.name]}]",
            )
        else:
            seen[t.name] = i
        _check_tool(t, i, out)
    return {t.name: t for t in env.tools}


def check_tool(tool: ToolSpec, *, tree: ast.Module | None = None) -> list[ValidationIssue]:
    """The rules of one tool on its own (texts, name, schema, source, signature, golden-call
    arguments), as `check_structure` applies them to each tool; fields read `tools[0]...`.
    `tree`: the source already parsed by the caller, so it is not parsed twice."""
    out = Issues("")
    _check_tool(tool, 0, out, tree)
    return list(out)


def _check_tool(t: ToolSpec, i: int, out: Issues, tree: ast.Module | None = None) -> None:
    _check_non_empty([(f"tools[{i}].description", t.description), (f"tools[{i}].source", t.source)], out)
    if not (t.name.isascii() and t.name.isidentifier()) or keyword.iskeyword(t.name) or len(t.name) > _MAX_TOOL_NAME:
        out.add(
            f"tools[{i}].name",
            Rule.TOOL_NAME_IDENTIFIER,
            f"{t.name!r} is not a valid tool name: use an ASCII Python identifier, not a keyword, "
            f"at most {_MAX_TOOL_NAME} characters",
        )
    schema_ok = _check_schema(t, i, out)
    _check_source(t, i, out, tree)
    _check_call_key(t, i, out)
    if schema_ok:
        validator = argument_validator(t.parameters)
        for j, g in enumerate(t.golden_calls):
            for err in sorted(validator.iter_errors(g.args), key=lambda e: list(e.absolute_path)):
                where = "".join(f"[{p!r}]" for p in err.absolute_path)
                out.add(
                    f"tools[{i}].golden_calls[{j}].args{where}",
                    Rule.GOLDEN_ARGS_SCHEMA,
                    f"arguments do not match the parameters schema of {t.name!r}: {err.message}",
                )


def _check_call_key(t: ToolSpec, i: int, out: Issues) -> None:
    key = t.call_key
    if key is None:
        return
    props = set((t.parameters.get("properties") or {}) if isinstance(t.parameters, dict) else {})
    named = {"params": set(key.params), "includes": set(key.includes), "defaults": set(key.defaults)}
    named["unordered"] = {p for group in key.unordered for p in group}
    for where, names in named.items():
        unknown = sorted(names - props)
        if unknown:
            out.add(f"tools[{i}].call_key.{where}", Rule.CALL_KEY, f"{unknown} are not parameters of {t.name!r}")
        if where != "params" and names - set(key.params):
            out.add(
                f"tools[{i}].call_key.{where}",
                Rule.CALL_KEY,
                f"{sorted(names - set(key.params))} are not among the identifying params {key.params}",
            )


def _check_schema(t: ToolSpec, i: int, out: Issues) -> bool:
    path = f"tools[{i}].parameters"
    error = schema_error(t.parameters)
    if error is not None:
        where = "".join(f"[{p!r}]" for p in error.absolute_path)
        out.add(path + where, Rule.TOOL_SCHEMA_VALID, f"not a valid JSON Schema: {error.message}")
        return False
    if t.parameters.get("type") != "object":
        out.add(
            path,
            Rule.TOOL_PARAMETERS_OBJECT,
            f'parameters must be an object schema ("type": "object"), got type {t.parameters.get("type")!r}',
        )
        return False
    return True


def _check_source(t: ToolSpec, i: int, out: Issues, tree: ast.Module | None = None) -> None:
    path = f"tools[{i}].source"
    if tree is None:
        try:
            tree = ast.parse(t.source)
        except SyntaxError as err:
            out.add(path, Rule.TOOL_SOURCE_SYNTAX, f"does not parse: {err.msg} (line {err.lineno})")
            return
    defs = [n for n in tree.body if _binds(n, t.name)]
    if not defs:
        out.add(path, Rule.TOOL_SOURCE_DEFINES, f"defines no top-level callable named {t.name!r}")
        return
    last = defs[-1]  # the binding that wins at import
    if isinstance(last, ast.AsyncFunctionDef):
        out.add(path, Rule.TOOL_SOURCE_DEFINES, f"{t.name!r} is `async def`; tools are called synchronously, use `def`")
    elif isinstance(last, ast.FunctionDef):
        _check_signature(t, last, path, out)


def _binds(node: ast.stmt, name: str) -> bool:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(isinstance(tg, ast.Name) and tg.id == name for tg in node.targets)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and node.target.id == name
    if isinstance(node, ast.Import | ast.ImportFrom):
        return any((a.asname or a.name) == name for a in node.names)
    return False


def _check_signature(t: ToolSpec, fn: ast.FunctionDef, path: str, out: Issues) -> None:
    a = fn.args
    props = set((t.parameters.get("properties") or {}).keys())
    keyword_params = [p.arg for p in a.args] + [p.arg for p in a.kwonlyargs]
    positional = a.posonlyargs + a.args  # defaults cover the last len(a.defaults) of these
    no_default = positional[: len(positional) - len(a.defaults)]
    posonly_needed = [p.arg for p in no_default if p in a.posonlyargs]
    needed = [p.arg for p in no_default if p in a.args]
    needed += [p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None]
    if posonly_needed:
        out.add(
            path,
            Rule.TOOL_SIGNATURE,
            f"{t.name}() has positional-only parameters {posonly_needed}; calls pass keywords",
        )
    if a.kwarg is None:
        extra = sorted(props - set(keyword_params))
        if extra:
            out.add(path, Rule.TOOL_SIGNATURE, f"schema properties {extra} are not parameters of {t.name}()")
    missing = sorted(set(needed) - props)
    if missing:
        out.add(path, Rule.TOOL_SIGNATURE, f"{t.name}() requires {missing}, which the schema does not declare")


def _check_assignment(env: EnvSpec, tools: dict[str, ToolSpec], out: Issues) -> None:
    used: dict[str, int] = {}
    for i, q in enumerate(env.sub_questions):
        if q.needs_tool and not q.tool:
            out.add(f"sub_questions[{i}].tool", Rule.TOOL_ASSIGNMENT, f"{q.id!r} needs a tool but names none")
            continue
        if not q.needs_tool:
            if q.tool:
                out.add(
                    f"sub_questions[{i}].tool",
                    Rule.TOOL_ASSIGNMENT,
                    f"{q.id!r} has needs_tool=false but names tool {q.tool!r}; set one or the other",
                )
            continue
        if q.tool not in tools:
            out.add(
                f"sub_questions[{i}].tool",
                Rule.TOOL_EXISTS,
                f"{q.id!r} needs tool {q.tool!r}, which is not among the tools {sorted(tools)}",
            )
            continue
        tool = tools[q.tool]
        used.setdefault(q.tool, i)
        if tool.golden_calls and not any(answer_in_text(q.answer, g.expected, q.match) for g in tool.golden_calls):
            out.add(
                f"sub_questions[{i}].answer",
                Rule.GOLDEN_COVERS_ANSWER,
                f"no golden call of {q.tool!r} expects an output containing {q.id!r}'s answer {q.answer!r}",
            )
    index = {t.name: i for i, t in enumerate(env.tools)}
    _check_golden_answers(env, index, out)
    for name in used:
        if not tools[name].golden_calls:
            out.add(
                f"tools[{index[name]}].golden_calls",
                Rule.GOLDEN_PRESENT,
                f"{name!r} answers sub-questions but has no golden call to verify it",
            )


def _check_golden_answers(env: EnvSpec, index: dict[str, int], out: Issues) -> None:
    # A sub-question naming no tool, or a missing one, is reported by tool_assignment / tool_exists.
    tool_of = {q.id: q.tool for q in env.sub_questions}
    for t in env.tools:
        for j, g in enumerate(t.golden_calls):
            wrong = [a for a in g.answers if a not in tool_of or (tool_of[a] in index and tool_of[a] != t.name)]
            if wrong:
                out.add(
                    f"tools[{index[t.name]}].golden_calls[{j}].answers",
                    Rule.GOLDEN_ANSWERS,
                    f"{wrong} are not sub-questions answered by {t.name!r}",
                )


def _check_shape(env: EnvSpec, out: Issues) -> None:
    shape = shape_of(env)
    expected = classify(shape.tool_nodes, shape.hops)
    if expected is None:
        out.add("sub_questions", Rule.HAS_TOOL_NODE, "no sub-question needs a tool; an environment needs at least one")
    elif expected is not env.scenario_type:
        out.add(
            "scenario_type",
            Rule.SCENARIO_TYPE,
            f"declared {env.scenario_type.value} but the trace has {shape.tool_nodes} tool node(s) and "
            f"{shape.hops} hop(s), which is {expected.value} (see env_registry.shape)",
        )


# -- records -------------------------------------------------------------------------------


def parse_record(text: str | bytes) -> tuple[EnvSpec | None, list[ValidationIssue]]:
    """Parse one JSON record into a spec. An empty id is filled with the content hash (it is
    derivable); every parse problem comes back as a `parse` issue naming the field."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        return None, [ValidationIssue("", "", Rule.PARSE, f"not JSON: {exc}")]
    env_id = str(raw.get("id", "")) if isinstance(raw, dict) else ""
    try:
        spec = EnvSpec.model_validate(raw)
    except ValidationError as exc:
        issues = [
            ValidationIssue(env_id, _loc(err["loc"]), Rule.PARSE, err["msg"]) for err in exc.errors(include_url=False)
        ]
        return None, issues
    if not spec.id:
        spec = spec.with_id()
    return spec, []


def _loc(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def golden_call_of(issue: ValidationIssue) -> tuple[int, int] | None:
    """(tool index, golden-call index) of an issue `replay_env` reported for one call; None otherwise."""
    return issue.golden_call
