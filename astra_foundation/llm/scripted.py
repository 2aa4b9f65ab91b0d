"""Scripted backend: canned responses instead of a model. For tests and for dry runs.

A script is a list of rules, tried in order; the first that matches a request answers it:

    {"step": "env.decompose",            # the step name the caller passed; "*" or absent: any
     "match": "Albuquerque",             # optional regex searched in the request's message texts
     "responses": ["...", "..."],        # served in order; after the last, "then" decides
     "then": "repeat_last"}              # or "cycle", or "exhausted" (later matches fall through)

A response is a string (the assistant's content) or an object with any of
`content`, `tool_calls` ([{"name", "arguments"}], arguments an object or a string),
`finish_reason`, or `error`: {"kind": "timeout"} / {"kind": "http", "status": 429,
"retry_after": 1.5} / {"kind": "fatal"}, which the backend raises like a real server would.

Files: a `.json` list of rules or `.jsonl` with one rule per line. In code, a `responder`
callable `(step, payload) -> response | None` may be given instead of (or before) the rules.
A request nothing matches raises `LLMUnavailable` naming the step and the prompt's start:
a script with a hole is a bug of the script, not a model answer.

Usage reports whitespace-separated word counts (no tokenizer is involved).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from astra_foundation.llm.types import LLMUnavailable, TransientError

Responder = Callable[[str, dict[str, Any]], Any]


def request_text(payload: dict[str, Any]) -> str:
    """All message texts of a request, one per line, as rules match them."""
    parts = []
    for m in payload.get("messages", []):
        content = m.get("content")
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(f"{m.get('role', '')}: {content or ''}")
    return "\n".join(parts)


class _Rule:
    def __init__(self, raw: dict[str, Any], where: str):
        unknown = set(raw) - {"step", "match", "responses", "response", "then"}
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
        self.step = raw.get("step") or "*"
        self.pattern = re.compile(raw["match"], re.DOTALL) if raw.get("match") else None
        responses = raw.get("responses", [raw["response"]] if "response" in raw else None)
        if not isinstance(responses, list) or not responses:
            raise ValueError(f"{where}: a rule needs `response` or a non-empty `responses` list")
        self.responses = responses
        self.then = raw.get("then", "repeat_last")
        if self.then not in ("repeat_last", "cycle", "exhausted"):
            raise ValueError(f"{where}: `then` must be repeat_last, cycle or exhausted, not {self.then!r}")
        self.served = 0

    def matches(self, step: str, text: str) -> bool:
        if self.step != "*" and self.step != step:
            return False
        if self.then == "exhausted" and self.served >= len(self.responses):
            return False
        return self.pattern is None or bool(self.pattern.search(text))

    def next(self) -> Any:
        i = self.served
        self.served += 1
        if i < len(self.responses):
            return self.responses[i]
        if self.then == "cycle":
            return self.responses[i % len(self.responses)]
        return self.responses[-1]


def load_rules(path: str | Path) -> list[dict[str, Any]]:
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        rules = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rules.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
        return rules
    rules = json.loads(text)
    if not isinstance(rules, list):
        raise ValueError(f"{path}: expected a JSON list of rules")
    return rules


def _words(text: str) -> int:
    return len(text.split())


# A client whose backend is scripted names its model `scripted:<what answers>` (build_client), so
# records made in a dry run say so (`scripted_source`), whatever --model says.
SCRIPTED_MODEL_PREFIX = "scripted:"


def scripted_model(source: str) -> str:
    """The model name of a client answered by `source` (a responder MODULE:FUNCTION or a rules file)."""
    return SCRIPTED_MODEL_PREFIX + source


def scripted_source(model: str | None) -> str | None:
    """What answered instead of a model, when `model` is a scripted client's model name; else None."""
    if model and model.startswith(SCRIPTED_MODEL_PREFIX):
        return model[len(SCRIPTED_MODEL_PREFIX) :]
    return None


class ScriptedBackend:
    name = "scripted"

    def __init__(self, rules: list[dict[str, Any]] | None = None, *, responder: Responder | None = None):
        self._rules = [_Rule(r, f"rule {i}") for i, r in enumerate(rules or [])]
        self._responder = responder
        self._lock = threading.Lock()
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def _pick(self, step: str, payload: dict[str, Any]) -> Any:
        if self._responder is not None:
            answer = self._responder(step, payload)
            if answer is not None:
                return answer
        text = request_text(payload)
        with self._lock:
            for rule in self._rules:
                if rule.matches(step, text):
                    return rule.next()
        last = next((m.get("content") or "" for m in reversed(payload.get("messages", []))), "")
        raise LLMUnavailable(
            f"scripted backend: no rule matches step {step!r}; last message starts {str(last)[:160]!r}"
        )

    async def send(self, payload: dict[str, Any], *, step: str) -> tuple[dict[str, Any], str | None]:
        self.requests.append((step, payload))
        return response_body(self._pick(step, payload), payload, where=f"step {step!r}"), None

    async def aclose(self) -> None:
        return None


def response_body(answer: Any, payload: dict[str, Any], *, where: str = "scripted response") -> dict[str, Any]:
    """The `chat.completion` body for a scripted response (see the module doc for its forms);
    an `error` response raises what a real server's failure would make the client see."""
    if isinstance(answer, str):
        answer = {"content": answer}
    if not isinstance(answer, dict):
        raise LLMUnavailable(f"scripted backend: response for {where} is a {type(answer).__name__}")
    error = answer.get("error")
    if error:
        kind = error.get("kind")
        if kind == "timeout":
            raise TransientError("scripted: timed out")
        if kind == "http":
            status = int(error.get("status", 500))
            if status == 429 or status >= 500:
                raise TransientError(f"scripted: HTTP {status}", retry_after=error.get("retry_after"), status=status)
            raise LLMUnavailable(f"scripted: HTTP {status}")
        raise LLMUnavailable(f"scripted: {error.get('message', 'fatal error')}")
    message: dict[str, Any] = {"role": "assistant", "content": answer.get("content", "")}
    if answer.get("tool_calls"):
        message["tool_calls"] = [
            {
                "id": c.get("id", f"call_{i}"),
                "type": "function",
                "function": {
                    "name": c["name"],
                    "arguments": c["arguments"]
                    if isinstance(c.get("arguments"), str)
                    else json.dumps(c.get("arguments", {}), ensure_ascii=False),
                },
            }
            for i, c in enumerate(answer["tool_calls"])
        ]
    finish = answer.get("finish_reason") or ("tool_calls" if answer.get("tool_calls") else "stop")
    return {
        "object": "chat.completion",
        "model": payload.get("model", "scripted"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": _words(request_text(payload)),
            "completion_tokens": _words(message["content"] or ""),
        },
    }
