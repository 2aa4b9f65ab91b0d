"""`python -m data_synth traj import-astra FILE... --output-file sft.parquet`: ASTRA-SFT-style
conversations to the SFT parquet verl's trainer reads (the format `traj export` writes, see
`export_sft`), with the checks our own trajectories pass; rejected rows keep their reasons.

Two row formats (JSON, JSONL or parquet; fields may be JSON text, as in the releases):

- `openai`: `messages` (OpenAI chat: assistant `tool_calls` of `{id, type, function: {name,
  arguments}}`, `tool` results with `tool_call_id`) and `tools` (OpenAI tools or bare functions).
- `astra_sft` (the ASTRA-SFT-1k release): `trajectory` (Qwen-Agent messages: an assistant
  message with `function_call: {name, arguments}` per call, each answered by a `function`
  message; text and calls of one step arrive as separate assistant messages) and `mcp_info`
  (`{base_info: {group_info, tool_list}, call_info}`, the tool documents).

Both become one conversation of `{role, content, tool_calls?, tool_call_id?, name?}` messages
(consecutive assistant messages of one step merged; calls without ids numbered `call_<n>`;
`function` results paired with the step's calls, by `extra.function_id` when given, else by
name, else in order). Tool parameters are normalised as `traj ingest` does (`schema`).

Checks (`Check`, stable strings counted in the summary):
  format               the row lacks a field, or a field is not JSON of the right shape
  tool_schema          a tool document cannot be used (name, parameters), or two share a name
  agent_error          an assistant message is ASTRA's failure marker `[ERROR: ...]`
  role                 a message has an unknown role, or the conversation has no user message
  call_malformed       a call without a name, or whose arguments are not a JSON object (empty
                       arguments too: `{}` is how a call without parameters is written)
  call_unknown_tool    a call names a tool the row does not list
  call_arguments       a call's arguments do not fit the tool's parameters schema (formats asserted)
  result_without_call  a tool result answers no call of the step before it
  call_without_result  a call gets no result before the conversation moves on
  no_final_answer      the conversation does not end with an assistant answer without calls

The three call checks are RL's own pre-call check (`env_registry.call_gate`, the one the rollout
and `traj interact` run), so an imported conversation never shows a call RL would refuse.

Reasoning (`reasoning_content`) is dropped by default; `--reasoning inline` keeps it in front of
the content as `<think>...</think>` (what Qwen3-style templates render for thinking models).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from astra_foundation.clikit import add_output_file, run_cli
from astra_foundation.llm.types import ToolCall
from data_synth.traj.records import content_id
from data_synth.traj.schema import SchemaRejected, check_tool_name, normalize_parameters
from env_registry import call_errors
from env_registry.arguments import argument_validator
from env_registry.call_gate import CallStatus, check_call
from env_registry.episode_driver import ParsedCall
from env_registry.importers.sources import (
    SourceRow,
    check_files,
    decode_json_text,
    has_fields,
    read_rows,
)
from env_registry.sft_record import SFTRecord

ERROR_MARKER = "[ERROR:"


class Check(str, Enum):
    FORMAT = "format"
    TOOL_SCHEMA = "tool_schema"
    AGENT_ERROR = "agent_error"
    ROLE = "role"
    CALL_MALFORMED = "call_malformed"
    CALL_UNKNOWN_TOOL = "call_unknown_tool"
    CALL_ARGUMENTS = "call_arguments"
    RESULT_WITHOUT_CALL = "result_without_call"
    CALL_WITHOUT_RESULT = "call_without_result"
    NO_FINAL_ANSWER = "no_final_answer"


@dataclass(frozen=True)
class Problem:
    check: Check
    where: str  # e.g. "messages[3].tool_calls[0]"
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"check": self.check.value, "where": self.where, "message": self.message}


@dataclass
class Conversation:
    """A row read into our message format, with the problems found while reading it."""

    format: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)  # OpenAI tools, parameters normalised
    server: str = ""
    problems: list[Problem] = field(default_factory=list)


def _text(content: Any) -> str:
    """Message content as text (Qwen-Agent may send a list of `{"text": ...}` items)."""
    if isinstance(content, list):
        return "".join(c.get("text", "") for c in content if isinstance(c, dict))
    return content if isinstance(content, str) else ""


def _tools(raw: list[Any], where: str, out: Conversation) -> None:
    seen: set[str] = set()
    for i, t in enumerate(raw):
        fn = t["function"] if isinstance(t, dict) and isinstance(t.get("function"), dict) else t
        try:
            if not isinstance(fn, dict):
                raise SchemaRejected(f"a tool must be an object, got {type(fn).__name__}")
            name = check_tool_name(fn.get("name"))
            parameters = normalize_parameters(fn.get("parameters", fn.get("inputSchema")))
        except SchemaRejected as exc:
            out.problems.append(Problem(Check.TOOL_SCHEMA, f"{where}[{i}]", str(exc)))
            continue
        if name in seen:
            out.problems.append(Problem(Check.TOOL_SCHEMA, f"{where}[{i}]", f"a second tool named {name!r}"))
            continue
        seen.add(name)
        description = fn.get("description") if isinstance(fn.get("description"), str) else ""
        out.tools.append(
            {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}
        )


def _field(data: dict[str, Any], name: str, kind: type, out: Conversation) -> Any:
    try:
        value = decode_json_text(data.get(name), name)
    except ValueError as exc:
        out.problems.append(Problem(Check.FORMAT, name, str(exc)))
        return None
    if not isinstance(value, kind):
        out.problems.append(Problem(Check.FORMAT, name, f"must be a JSON {kind.__name__}, got {type(value).__name__}"))
        return None
    return value


# -- reading the two formats into our messages ------------------------------------------------


@dataclass
class _Builder:
    """Accumulates messages, merging the assistant messages of one step."""

    reasoning: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    step: dict[str, Any] | None = None
    calls: int = 0

    def flush(self) -> None:
        if self.step is not None:
            self.messages.append(self.step)
            self.step = None

    def plain(self, role: str, content: str) -> None:
        self.flush()
        self.messages.append({"role": role, "content": content})

    def assistant(self, message: dict[str, Any]) -> dict[str, Any]:
        """The open assistant step (a text after calls starts a new one)."""
        text = _text(message.get("content"))
        thought = message.get("reasoning_content") if self.reasoning == "inline" else None
        if self.step is not None and self.step.get("tool_calls") and (text or thought):
            self.flush()
        if self.step is None:
            self.step = {"role": "assistant", "content": ""}
        if isinstance(thought, str) and thought.strip():
            self.step["content"] += f"<think>\n{thought.strip()}\n</think>\n\n"
        self.step["content"] += text
        return self.step

    def call(self, name: Any, arguments: Any, call_id: Any) -> None:
        self.calls += 1
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        cid = call_id if isinstance(call_id, str) and call_id else f"call_{self.calls}"
        self.step.setdefault("tool_calls", []).append(
            {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}
        )

    def result(self, content: str, call_id: Any, name: Any) -> None:
        """A tool result, paired with the call it answers: by the id the source gives, else the
        first unanswered call of the last step (the one named `name` if there is one)."""
        self.flush()
        step, answered = self._last_step()
        open_calls = [c for c in (step or {}).get("tool_calls", []) if c["id"] not in answered]
        if not isinstance(call_id, str) or not call_id:
            named = [c for c in open_calls if c["function"]["name"] == name]
            call_id = (named or open_calls or [{"id": ""}])[0]["id"]
        if not isinstance(name, str) or not name:
            name = next((c["function"]["name"] for c in open_calls if c["id"] == call_id), "")
        self.messages.append({"role": "tool", "content": content, "tool_call_id": call_id, "name": name or ""})

    def _last_step(self) -> tuple[dict[str, Any] | None, set[str]]:
        """The assistant step the trailing tool results answer, and the call ids answered so far."""
        answered: set[str] = set()
        for m in reversed(self.messages):
            if m["role"] != "tool":
                return (m if m["role"] == "assistant" and m.get("tool_calls") else None), answered
            answered.add(m["tool_call_id"])
        return None, answered


def _read_openai(data: dict[str, Any], out: Conversation, reasoning: str) -> None:
    messages = _field(data, "messages", list, out)
    tools = _field(data, "tools", list, out)
    if messages is None or tools is None:
        return
    _tools(tools, "tools", out)
    b = _Builder(reasoning)
    for m in messages:
        role = m.get("role") if isinstance(m, dict) else None
        if role == "assistant":
            b.assistant(m)
            for c in m.get("tool_calls") or []:
                fn = c.get("function") if isinstance(c, dict) else None
                fn = fn if isinstance(fn, dict) else {}
                b.call(fn.get("name"), fn.get("arguments"), c.get("id") if isinstance(c, dict) else None)
        elif role == "tool":
            b.result(_text(m.get("content")), m.get("tool_call_id"), m.get("name"))
        else:
            b.plain(role if isinstance(role, str) else f"<{role!r}>", _text(m.get("content")) if role else "")
    b.flush()
    out.messages = b.messages


def _read_astra_sft(data: dict[str, Any], out: Conversation, reasoning: str) -> None:
    trajectory = _field(data, "trajectory", list, out)
    mcp = _field(data, "mcp_info", dict, out)
    if trajectory is None or mcp is None:
        return
    base = mcp.get("base_info") if isinstance(mcp.get("base_info"), dict) else {}
    tool_list = base.get("tool_list")
    if not isinstance(tool_list, list):
        out.problems.append(Problem(Check.FORMAT, "mcp_info.base_info.tool_list", "must be a list of tool documents"))
        return
    _tools(tool_list, "mcp_info.base_info.tool_list", out)
    group = base.get("group_info") if isinstance(base.get("group_info"), dict) else {}
    out.server = str(group.get("server_name") or "")
    b = _Builder(reasoning)
    for m in trajectory:
        role = m.get("role") if isinstance(m, dict) else None
        extra = m.get("extra") if isinstance(m, dict) and isinstance(m.get("extra"), dict) else {}
        if role == "assistant":
            b.assistant(m)
            fc = m.get("function_call")
            if fc is not None:  # a call that is not an object is kept so the check reports it
                name, arguments = (fc.get("name"), fc.get("arguments")) if isinstance(fc, dict) else (None, fc)
                b.call(name, arguments, extra.get("function_id"))
        elif role in ("function", "tool"):
            b.result(_text(m.get("content")), extra.get("function_id"), m.get("name"))
        else:
            b.plain(role if isinstance(role, str) else f"<{role!r}>", _text(m.get("content")) if role else "")
    b.flush()
    out.messages = b.messages


@dataclass(frozen=True)
class RowFormat:
    name: str
    detect: Callable[[dict[str, Any]], bool]
    read: Callable[[dict[str, Any], Conversation, str], None]


def _environment_record(data: dict[str, Any], out: Conversation, reasoning: str) -> None:
    out.problems.append(
        Problem(
            Check.FORMAT,
            "",
            "an ASTRA environment record (pipeline step 4/5 output or an ASTRA-RL-1k row), not a conversation: "
            "import it with `python -m env_registry --store STORE import-astra FILE`",
        )
    )


FORMATS = (
    RowFormat("astra_sft", has_fields("trajectory", "mcp_info"), _read_astra_sft),
    RowFormat("openai", has_fields("messages", "tools"), _read_openai),
    RowFormat(
        "environment",
        lambda d: has_fields("decomposition_trace")(d) or has_fields("tool_schema", "tool_dict")(d),
        _environment_record,
    ),
)


def read_conversation(data: dict[str, Any], reasoning: str = "drop") -> Conversation:
    """One row in our message format, checked (`check_conversation`)."""
    for fmt in FORMATS:
        if fmt.detect(data):
            conv = Conversation(fmt.name)
            fmt.read(data, conv, reasoning)
            if not conv.problems:
                conv.problems = check_conversation(conv.messages, conv.tools)
            return conv
    return Conversation(
        "unknown",
        problems=[
            Problem(
                Check.FORMAT,
                "",
                f"not an SFT conversation: expected `messages` + `tools` (OpenAI) or `trajectory` + `mcp_info` "
                f"(ASTRA-SFT-1k); found {sorted(data)[:12]}",
            )
        ],
    )


# -- checks -----------------------------------------------------------------------------------


# RL's refusal of a call, as the check that rejects the row
_REFUSED = {
    CallStatus.BAD_JSON: Check.CALL_MALFORMED,
    CallStatus.UNKNOWN_TOOL: Check.CALL_UNKNOWN_TOOL,
    CallStatus.SCHEMA_ERROR: Check.CALL_ARGUMENTS,
}


def _attempt(call: dict[str, Any], index: int) -> ParsedCall:
    """The call as RL's check reads it: decoded as the LLM client's OpenAI calls are (`traj
    interact`'s), a call without a name malformed as RL's hermes parser has it (`missing_name`)."""
    name = call["function"]["name"]
    if not isinstance(name, str) or not name.strip():
        why = call_errors.malformed(f"the call names no function: {call['function']!r}")
        return ParsedCall(name=None, arguments=None, raw=str(call["function"]), error_kind="missing_name", error=why)
    return ParsedCall.from_openai(ToolCall.from_openai(call, index))


def _check_call(call: dict[str, Any], where: str, schemas: dict[str, dict[str, Any]], index: int) -> list[Problem]:
    """RL's pre-call check of one call (`env_registry.call_gate`): the row is rejected with the
    refusal RL would give (a model trained on it must not learn calls RL refuses)."""
    attempt = _attempt(call, index)
    refusal = check_call(
        attempt.name,
        attempt.arguments,
        list(schemas),  # in the row's order, as RL shows them
        lambda name: argument_validator(schemas[name]),
        error_kind=attempt.error_kind,
        error=attempt.error,
    )
    return [] if refusal is None else [Problem(_REFUSED[refusal.status], where, refusal.text)]


def check_conversation(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[Problem]:
    """Every problem of a conversation in our message format (pure)."""
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    out: list[Problem] = []
    open_calls: dict[str, str] = {}  # id -> where, calls of the last step not answered yet
    for i, m in enumerate(messages):
        where, role = f"messages[{i}]", m["role"]
        if role != "tool" and open_calls:
            out += [
                Problem(Check.CALL_WITHOUT_RESULT, w, f"call {cid!r} gets no result") for cid, w in open_calls.items()
            ]
            open_calls = {}
        if role not in ("system", "user", "assistant", "tool"):
            out.append(Problem(Check.ROLE, where, f"unknown role {role!r}"))
        elif role == "assistant":
            if m["content"].lstrip().startswith(ERROR_MARKER):
                out.append(Problem(Check.AGENT_ERROR, where, f"the agent run failed: {m['content'][:200]}"))
            for j, call in enumerate(m.get("tool_calls", [])):
                out += _check_call(call, f"{where}.tool_calls[{j}]", schemas, j)
                open_calls[call["id"]] = f"{where}.tool_calls[{j}]"
        elif role == "tool":
            if m["tool_call_id"] not in open_calls:
                out.append(
                    Problem(
                        Check.RESULT_WITHOUT_CALL,
                        where,
                        f"a result (of {m.get('name') or '?'}) that answers no call of the step before it",
                    )
                )
            else:
                del open_calls[m["tool_call_id"]]
    out += [Problem(Check.CALL_WITHOUT_RESULT, w, f"call {cid!r} gets no result") for cid, w in open_calls.items()]
    if not any(m["role"] == "user" for m in messages):
        out.append(Problem(Check.ROLE, "messages", "the conversation has no user message"))
    last = messages[-1] if messages else None
    if last is None or last["role"] != "assistant" or last.get("tool_calls") or not last["content"].strip():
        out.append(
            Problem(
                Check.NO_FINAL_ANSWER,
                f"messages[{len(messages) - 1}]",
                "the conversation must end with an assistant answer without calls",
            )
        )
    return out


# -- the command --------------------------------------------------------------------------------


def sft_row(conv: Conversation, row: SourceRow) -> dict[str, Any]:
    """A parquet row: the `SFTRecord` every SFT writer builds (`traj export`'s and golden's too)."""
    record = SFTRecord.build(
        row.label,
        conv.messages,
        conv.tools,
        server_id=conv.server,
        task_id=content_id(conv.messages),
        source=f"{conv.format}:{row.label}",
    )
    return record.row()


def _rows(files: list[str], reasoning: str, formats: Counter) -> Iterator[tuple[SourceRow, Conversation]]:
    for file in files:
        for row in read_rows(file):
            if row.data is None:
                formats["unreadable"] += 1
                yield row, Conversation("unreadable", problems=[Problem(Check.FORMAT, "", row.error or "")])
                continue
            conv = read_conversation(row.data, reasoning)
            formats[conv.format] += 1
            yield row, conv


def run_import(
    files: list[str], out: Path, rejects_path: Path, reasoning: str = "drop", parallel_calls: str = "keep"
) -> dict[str, Any]:
    """Read, check and write; returns the counts the command prints. `parallel_calls="drop"`
    leaves out sound rows with several calls in one step (see `astra_verl.training.sft_dataset` for why)."""
    formats: Counter = Counter()
    checks: Counter = Counter()
    kept, rejected, dropped = [], 0, 0
    with open(rejects_path, "w", encoding="utf-8") as rejects:  # removed again when nothing was rejected
        for row, conv in _rows(files, reasoning, formats):
            if conv.problems:
                rejected += 1
                checks.update({p.check.value for p in conv.problems})
                record = {
                    "file": row.file,
                    **row.where,
                    "problems": [p.to_dict() for p in conv.problems],
                    "record": row.text,
                }
                rejects.write(json.dumps(record, ensure_ascii=False) + "\n")
                if rejected <= 10:
                    p = conv.problems[0]
                    print(f"rejected {row.label}: [{p.check.value}] {p.where}: {p.message}")
            elif parallel_calls == "drop" and any(len(m.get("tool_calls", [])) > 1 for m in conv.messages):
                dropped += 1
            else:
                kept.append(sft_row(conv, row))
    if not rejected:
        rejects_path.unlink()
    if kept:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".parquet.tmp")
        import pyarrow as pa  # here, not at the top: `--help` must not pay for it
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(kept), tmp)
        tmp.replace(out)
    return {"formats": formats, "kept": len(kept), "rejected": rejected, "dropped": dropped, "checks": checks}


def _table(title: str, counts: Counter, total: int) -> None:
    print(f"{title}:")
    for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {key:<24} {n:>8}  {100 * n / max(total, 1):5.1f}%")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m data_synth traj import-astra",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("files", nargs="+", metavar="FILE", help=".json, .jsonl or .parquet")
    add_output_file(p, "SFT parquet to write")
    p.add_argument(
        "--rejects", type=Path, help="rejected rows with their problems (default: <output file>.rejects.jsonl)"
    )
    p.add_argument("--reasoning", choices=("drop", "inline"), default="drop", help="reasoning_content (default drop)")
    p.add_argument(
        "--parallel-calls",
        choices=("keep", "drop"),
        default="keep",
        help="rows with several calls in one step: keep (default) or drop (verl's per-turn check, "
        "see astra_verl/training/sft_dataset.py)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_cli(lambda: _import(args), resumes=False)  # one parquet, written at the end


def _import(args: argparse.Namespace) -> int:
    check_files(args.files)
    rejects = args.rejects or args.output_file.with_suffix(".rejects.jsonl")
    rejects.parent.mkdir(parents=True, exist_ok=True)
    counts = run_import(args.files, args.output_file, rejects, args.reasoning, args.parallel_calls)
    total = counts["kept"] + counts["rejected"] + counts["dropped"]
    print(f"\nread {total} conversations")
    _table("formats", counts["formats"], total)
    written = f"to {args.output_file}" if counts["kept"] else "(no parquet written)"
    print(
        f"kept {counts['kept']} {written}, rejected {counts['rejected']}, dropped {counts['dropped']} (parallel calls)"
    )
    if counts["rejected"]:
        print(f"rejected rows with their problems: {rejects}")
        _table("rejected rows by check", counts["checks"], counts["rejected"])
    return 1 if counts["rejected"] else 0
