"""Our environments as rows of the ASTRA-RL-1k release format (`env_registry export-astra-rl`).

A row holds what ASTRA's RL release holds and nothing more:

    prompt       [{"role": "system", ...}, {"role": "user", "content": question}] (JSON text)
    tool_schema  the environment's tools as OpenAI function schemas (JSON text)
    tool_dict    {tool name: Python source} (JSON text)
    sub_qa_dict  {tool name: [answers of the tool-needing sub-questions it answers, in trace order]}
                 (JSON text)

The golden calls, the sub-question texts, the dependencies, the final answer and the
identifying parameters are stripped, as the release strips them. Two uses: the recovery
benchmark (`bench/recovery.py`) recovers the calls from such rows and compares them with the
stripped ones (it keeps the environment: `answers_by_tool` maps a row's answers back to it);
and a user can hand our environments to ASTRA's own RL tooling, which reads exactly these four
fields. Rows are written as JSONL (one row a line) with the three dict/list fields as JSON text,
the way the release's viewer shows them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from env_registry.export import DEFAULT_SYSTEM_PROMPT, messages_for
from env_registry.spec import EnvSpec

__all__ = ["ROW_FIELDS", "answers_by_tool", "to_rl_row", "write_rl_rows"]

ROW_FIELDS = ("prompt", "tool_schema", "tool_dict", "sub_qa_dict")


def answers_by_tool(env: EnvSpec) -> dict[str, list[tuple[str, str]]]:
    """{tool: [(sub-question id, answer), ...]} in trace order: the k-th answer of a tool in a
    row's `sub_qa_dict` is the k-th sub-question listed here."""
    out: dict[str, list[tuple[str, str]]] = {}
    for q in env.sub_questions:
        if q.needs_tool and q.tool:
            out.setdefault(q.tool, []).append((q.id, q.answer))
    return out


def to_rl_row(env: EnvSpec, system_prompt: str | None = DEFAULT_SYSTEM_PROMPT) -> dict[str, Any]:
    """The environment as an ASTRA-RL-1k row (see the module docstring)."""
    prompt = messages_for(env, system_prompt)  # the answer channel stated, as in the verl rows
    answers = answers_by_tool(env)
    return {
        "prompt": json.dumps(prompt, ensure_ascii=False),
        "tool_schema": json.dumps([t.openai_schema() for t in env.tools], ensure_ascii=False),
        "tool_dict": json.dumps({t.name: t.source for t in env.tools}, ensure_ascii=False),
        "sub_qa_dict": json.dumps({tool: [a for _, a in pairs] for tool, pairs in answers.items()}, ensure_ascii=False),
    }


def write_rl_rows(envs: Iterable[EnvSpec], path: str | Path, system_prompt: str | None = DEFAULT_SYSTEM_PROMPT) -> int:
    """Write one RL-1k row per environment to a JSONL file; the number written."""
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        for env in envs:
            f.write(json.dumps(to_rl_row(env, system_prompt), ensure_ascii=False) + "\n")
            n += 1
    return n
