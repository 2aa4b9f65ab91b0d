"""The records a pipeline step reads and writes, and the envelope that stores them.

Every step output file is JSONL; each line is one `Envelope`: the result of processing one
input record (identified by its `key`):

    {"v": 1, "step": "env.verify", "key": "ctx:3f2a...:0", "status": "ok" | "rejected" | "error",
     "reason": null | "short_code", "detail": null | "what exactly", "record_version": 1,
     "out": [<output record>, ...], "meta": {"elapsed_s": .., "usage": {..}}}

- `ok`: `out` holds the step's outputs (one for most steps; fan-out steps may emit several,
  each with its own key).
- `rejected`: the input was judged unfit (`reason` is a low-cardinality code counted in the
  funnel, `detail` the specifics). Final: a rerun does not retry it.
- `error`: the step could not finish (LLM unreachable, a bug). Not final: a rerun retries it.

Output records subclass `Record`: a pydantic model with a `key` and a class-level `VERSION`
that is written as `record_version`; readers refuse versions they do not know.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from astra_foundation.strict import RecordModel

ENVELOPE_VERSION = 1

Status = Literal["ok", "rejected", "error"]
FINAL_STATUSES = ("ok", "rejected")


class Record(RecordModel):
    """Base of every typed record passed between steps."""

    VERSION: ClassVar[int] = 1

    key: str = Field(description="stable identity of the record; decides sharding and de-duplication")


class Reject(Exception):
    """Raise from `Step.process` to reject the input: `reason` is a short code, `detail` the specifics."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class Envelope(RecordModel):
    v: int = ENVELOPE_VERSION
    step: str
    key: str
    status: Status
    reason: str | None = None
    detail: str | None = None
    record_version: int = 1
    out: list[dict[str, Any]] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def final(self) -> bool:
        return self.status in FINAL_STATUSES
