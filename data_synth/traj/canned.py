"""A deterministic stand-in model for the trajectory prompts: dry runs of `data_synth traj`, tests.

    python -m data_synth traj run TOOLS.json --out /tmp/dry --responder data_synth.traj.canned:respond

This is NOT a model, and what it writes is not training data. It reads what it needs out of each
prompt of `data_synth/prompts/traj` and answers in the format that prompt asks for, so every step
runs for real on any tool documentation, with no server:

- proposals: consecutive runs of the listed tools; votes: every chain is coherent;
- queries carry their tool chain as a code word (`job <rot13 of "a+b">`), never a tool's name,
  which the back-translation and the agent decode: the chain a query was written for is the
  chain the agent calls, as with a model that understood the request;
- grades pass the default thresholds; rewrites append a note to the original request;
- the simulator answers `{"done": <call>}`, or the error the prompt asks for;
- the missing-value rewrite finds no value to withhold (those variant tasks are rejected,
  `no_value_to_withhold`; the declining variants need no model and run as with one);
- the agent calls the decoded tools one per turn, with a placeholder for each required argument,
  then reports the last result, ending with the answer channel; the judge gives 0.9, or 0.4 when a tool call failed.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable
from typing import Any

from data_synth.traj.judge import DIMENSIONS

__all__ = ["respond"]

_TOOL_LINE = re.compile(r"^- ([A-Za-z0-9_.-]+): ", re.MULTILINE)
_SCHEMA_LINE = re.compile(r'^\{"name": "([^"]+)"', re.MULTILINE)
_CODE = re.compile(r"job ([a-z0-9_.+-]+)")
_PLACEHOLDER = {"integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}


def _encode(tools: list[str]) -> str:
    return codecs.encode("+".join(tools), "rot13").lower()


def _decode(text: str) -> list[str]:
    m = _CODE.search(text)
    return codecs.decode(m.group(1), "rot13").split("+") if m else []


def _last_user(payload: dict[str, Any]) -> str:
    return next((m.get("content") or "" for m in reversed(payload["messages"]) if m["role"] == "user"), "")


def _propose(text: str, payload: dict[str, Any]) -> dict[str, Any]:
    names = _TOOL_LINE.findall(text)
    windows = [names[i : i + n] for n in (2, 3) for i in range(max(0, len(names) - n + 1))]
    return {"chains": [{"tools": w, "confidence": 0.8, "reason": "canned: consecutive tools"} for w in windows[:6]]}


def _vote(text: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"coherent": True, "reason": "canned: every chain is accepted"}


def _query_for(tools: list[str]) -> str:
    return f"Please carry out job {_encode(tools)} for customer c-42 today and tell me the outcome."


def _backtranslate_query(text: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"query": _query_for(_TOOL_LINE.findall(text))}


def _backtranslate_chain(text: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"tools": _decode(text)}


def _task_chain(text: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"queries": [_query_for(_SCHEMA_LINE.findall(text))]}


def _task_server(text: str, payload: dict[str, Any]) -> dict[str, Any]:
    names = _TOOL_LINE.findall(text)
    return {"tasks": [{"query": _query_for(names[:1]), "tools": names[:1]}]}


def _augment(mode: str) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    def rewrite(text: str, payload: dict[str, Any]) -> dict[str, Any]:
        original = re.search(r"^Original request: (.*)$", text, re.MULTILINE).group(1)
        return {"query": f"{original} (canned {mode} rewrite)"}

    return rewrite


def _task_score(text: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"question_quality": 4, "scenario_realism": 4, "tool_necessity": 5, "reason": "canned grades"}


def _simulate(text: str, payload: dict[str, Any]) -> dict[str, Any]:
    if "This call fails" in text:
        return {"status": "error", "result": "canned: the service is temporarily unavailable"}
    call = re.search(r"^Call: (.*)$", text, re.MULTILINE).group(1)
    return {"status": "ok", "result": {"done": call}}


def _arguments(parameters: dict[str, Any]) -> dict[str, Any]:
    props = parameters.get("properties") or {}
    return {k: _PLACEHOLDER.get((props.get(k) or {}).get("type"), "c-42") for k in parameters.get("required") or []}


def _agent(text: str, payload: dict[str, Any]) -> dict[str, Any]:
    messages = payload["messages"]
    user = next(m["content"] for m in messages if m["role"] == "user")
    plan = _decode(user)
    done = sum(1 for m in messages if m["role"] == "tool")
    schemas = {t["function"]["name"]: t["function"].get("parameters") or {} for t in payload.get("tools") or []}
    if done < len(plan) and plan[done] in schemas:
        return {"content": "", "tool_calls": [{"name": plan[done], "arguments": _arguments(schemas[plan[done]])}]}
    last = messages[-1]["content"] if messages[-1]["role"] == "tool" else "nothing to report"
    # ends with the answer channel, as the agent's system prompt asks (traj/agent_system.md)
    return {"content": f"Done in {done} steps. The last result was: {str(last)[:200]}\n<answer>{done} steps</answer>"}


def _judge(text: str, payload: dict[str, Any]) -> dict[str, Any]:
    value = 0.4 if "temporarily unavailable" in text else 0.9
    return {"scores": {d: value for d in DIMENSIONS}, "reason": "canned: 0.9, or 0.4 when a call failed"}


_HANDLERS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {
    "traj.propose": _propose,
    "traj.vote": _vote,
    "traj.backtranslate_query": _backtranslate_query,
    "traj.backtranslate_chain": _backtranslate_chain,
    "traj.task_chain": _task_chain,
    "traj.task_server": _task_server,
    "traj.augment_diverse": _augment("diverse"),
    "traj.augment_complicate": _augment("complicate"),
    "traj.augment_persona": _augment("persona"),
    "traj.task_score": _task_score,
    "traj.simulate": _simulate,
    "traj.agent": _agent,
    "traj.judge": _judge,
    "traj.withhold_value": lambda text, payload: {"argument": None, "reason": "canned: a dry run withholds nothing"},
}


def respond(step: str, payload: dict[str, Any]) -> Any:
    """The canned answer to one request of `step` (a scripted backend's responder)."""
    handler = _HANDLERS.get(step)
    if handler is None:
        raise ValueError(f"data_synth.traj.canned has no answer for step {step!r}; known: {sorted(_HANDLERS)}")
    out = handler(_last_user(payload), payload)
    return out if "tool_calls" in out or "content" in out else json.dumps(out)
