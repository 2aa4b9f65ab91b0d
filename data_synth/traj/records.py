"""Typed records of the trajectory pipeline (ASTRA §1), one per step boundary.

On disk every record is one JSON line carrying `record_version`; readers refuse versions they do
not know. Identity: a server is keyed by `server_id`; a chain by `(server_id, tools)`; a task by
`task_id` (a hash of its content), so reruns de-duplicate.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

RECORD_VERSION = 1


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid")

    record_version: int = RECORD_VERSION

    @field_validator("record_version")
    @classmethod
    def _known_version(cls, v: int) -> int:
        if v != RECORD_VERSION:
            raise ValueError(f"record_version {v} is not supported (this code reads version {RECORD_VERSION})")
        return v


def content_id(*parts: Any, n: int = 16) -> str:
    """A short stable hash of JSON-serialisable parts."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:n]


class ToolDoc(BaseModel):
    """One tool of a server: an OpenAI function (normalized `parameters`) and, where the source
    documents it, the JSON Schema of what it returns (`output`), used by edge scoring."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    parameters: dict[str, Any]
    output: dict[str, Any] | None = None

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str
    record: int = Field(description="0-based record index in the file (line for JSONL, element for a JSON list)")
    format: str


class Server(Record):
    """A tool server (an MCP server in ASTRA's corpus) with its valid tools.

    `call_info` is ASTRA's optional endpoint description, kept verbatim (e.g. `{"mock_tool": true}`
    or an MCP command/URL); `interact --backend mcp` reads it.
    """

    server_id: str
    title: str
    name: str
    description: str = ""
    domain: str = ""
    tools: list[ToolDoc]
    call_info: dict[str, Any] | None = None
    source: Source

    def tool(self, name: str) -> ToolDoc:
        for t in self.tools:
            if t.name == name:
                return t
        raise KeyError(f"server {self.server_id}: no tool named {name!r}")

    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]
