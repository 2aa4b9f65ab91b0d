"""Records and errors of the LLM client.

Errors are split by what a pipeline should do with the record that caused them:
- `TransientError`: raised by a backend for a failure worth retrying (timeout, 429, 5xx,
  junk body); the client retries it and the pipeline never sees it.
- `LLMUnavailable`: retries exhausted or a request the server refuses for good (400, 401):
  the record's status becomes `error` and a rerun tries it again.
- `LLMOutputError`: the model answered, but not usably (no JSON, wrong keys, failed checks)
  even after the repair round: the record is `rejected` with `reason`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field


def json_text(obj: Any, **kwargs: Any) -> str:
    """`json.dumps(obj, ensure_ascii=False)`, UTF-8-encodable whatever the strings hold.

    A model can write a lone surrogate as a JSON escape (`"\\ud83d"`); decoded, it is a str
    that UTF-8 cannot encode. Such text is written with ASCII escapes instead, which read back
    to the same value, so a file, the cache or a request body always takes it."""
    text = json.dumps(obj, ensure_ascii=False, **kwargs)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, **kwargs)
    return text


class LLMError(Exception):
    """Base of the client's errors."""


class TransientError(LLMError):
    """A failure worth retrying. `retry_after` (seconds) is the server's wish, when it stated one."""

    def __init__(self, message: str, *, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status


class LLMUnavailable(LLMError):
    """No usable response: retries exhausted, or a non-retryable HTTP status."""


class LLMOutputError(LLMError):
    """The model's reply could not be used. `reason` is short and stable (`<step>:<kind>`),
    `detail` says what exactly was wrong, `text` is the last reply (for inspection)."""

    def __init__(self, reason: str, detail: str, text: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.text = text


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class ToolCall(BaseModel):
    """One function call the model made. `arguments` is the raw string the model wrote; `args`
    its parsed object, or None with `error` saying why it does not parse."""

    id: str
    name: str
    arguments: str
    args: dict[str, Any] | None = None
    error: str | None = None

    @classmethod
    def from_openai(cls, raw: dict[str, Any], index: int) -> ToolCall:
        fn = raw.get("function")
        fn = fn if isinstance(fn, dict) else {}  # a server can send anything here: no name, no arguments
        arguments = fn.get("arguments")
        if isinstance(arguments, dict):  # some servers send an object instead of a string
            try:
                arguments = json.dumps(arguments, ensure_ascii=False)
            except (ValueError, RecursionError):  # nested deeper than the encoder goes
                arguments = ""
        arguments = arguments if isinstance(arguments, str) else ""
        args, error = parse_arguments(arguments)
        return cls(
            id=str(raw.get("id") or f"call_{index}"),
            name=str(fn.get("name") or ""),
            arguments=arguments,
            args=args,
            error=error,
        )

    def openai(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def parse_arguments(arguments: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the object, None) or (None, why not) for a call's argument string; "" reads as {}.

    Never raises: a model can write anything here. Nesting deeper than Python's decoder recurses
    raises RecursionError, which BFCL's handlers catch like any decoding error (the step is
    dropped); here it is an error like invalid JSON, so one reply cannot abort a run."""
    try:
        parsed = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError as e:
        return None, f"arguments are not valid JSON ({e.msg} at column {e.colno})"
    except (ValueError, RecursionError) as e:  # e.g. an integer over Python's 4300-digit limit
        return None, f"arguments are not decodable JSON ({type(e).__name__}: {str(e)[:120]})"
    if isinstance(parsed, dict):
        return parsed, None
    return None, f"arguments are a JSON {type(parsed).__name__}, not an object"


class Completion(BaseModel):
    """One chat completion (the first choice), as the pipeline steps see it."""

    text: str = Field(description="message content; '' when the model only called tools")
    reasoning: str | None = Field(default=None, description="reasoning_content when the server splits it off")
    tool_calls: list[ToolCall] = Field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    endpoint: str | None = Field(default=None, description="base URL that answered; None for scripted")
    cached: bool = False
    latency_s: float = 0.0

    @classmethod
    def from_response(cls, body: dict[str, Any], *, endpoint: str | None, cached: bool, latency_s: float) -> Completion:
        """Parse an OpenAI `chat.completion` body; raises ValueError when it is not one."""
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ValueError("response has no choices")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise ValueError("response choice has no message")
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        raw_calls = message.get("tool_calls") or []
        return cls(
            text=content if isinstance(content, str) else "",
            reasoning=message.get("reasoning_content") or message.get("reasoning"),
            tool_calls=[ToolCall.from_openai(c, i) for i, c in enumerate(raw_calls) if isinstance(c, dict)],
            finish_reason=choice.get("finish_reason"),
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            ),
            model=str(body.get("model") or ""),
            endpoint=endpoint,
            cached=cached,
            latency_s=latency_s,
        )

    def message(self) -> dict[str, Any]:
        """The assistant turn to append to a conversation (OpenAI format)."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["tool_calls"] = [c.openai() for c in self.tool_calls]
        return msg


class TokenCompletion(BaseModel):
    """One completion of a token prompt: OpenAI's `/completions` with the prompt as token ids and the
    generated token ids returned (vLLM: `return_token_ids`), how a policy is served to a token-level
    agent loop."""

    token_ids: list[int]
    text: str = ""
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    endpoint: str | None = None
    cached: bool = False
    latency_s: float = 0.0

    @classmethod
    def from_response(
        cls, body: dict[str, Any], *, endpoint: str | None, cached: bool, latency_s: float
    ) -> TokenCompletion:
        """Parse a `text_completion` body; a server that returns no token ids cannot serve a token-level
        loop (re-encoding its text would not give the tokens it sampled): `LLMUnavailable`, not retried."""
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ValueError("response has no choices")
        ids = choices[0].get("token_ids")
        if not isinstance(ids, list) or not all(isinstance(t, int) for t in ids):
            raise LLMUnavailable(
                f"{endpoint or 'the server'}: its completion carries no `token_ids`; serve the policy with a server "
                "that returns them (vLLM >= 0.10.2 with `return_token_ids`)"
            )
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        return cls(
            token_ids=ids,
            text=str(choices[0].get("text") or ""),
            finish_reason=choices[0].get("finish_reason"),
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            ),
            endpoint=endpoint,
            cached=cached,
            latency_s=latency_s,
        )


class StepUsage(BaseModel):
    """Counters of one step (or one record): what was asked, answered, cached, retried."""

    requests: int = 0  # sent to a backend (each retry counts)
    completions: int = 0  # answered (from a backend or the cache)
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0  # calls that ended in LLMUnavailable
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: StepUsage) -> None:
        for name in type(self).model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))
