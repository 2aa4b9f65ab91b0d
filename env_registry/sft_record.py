"""One row of an SFT parquet, whichever command writes it: the one record and the one version.

Three commands write the SFT parquet verl's trainer reads, and all three build their rows here:

    python -m env_registry export-sft RL_PARQUET --output-file SFT   golden demonstrations (`golden_sft`)
    python -m data_synth traj export --out RUN                        synthesized trajectories (`export_sft`)
    python -m data_synth traj import-astra FILE... --output-file SFT  ASTRA-SFT conversations (`astra_import`)

Columns (`SFTRecord`; a column only some writers fill is null, or its default, in the others' rows):

    messages        OpenAI chat messages (`SFTMessage`): assistant `tool_calls` of {id, type: "function",
                    function: {name, arguments}} with `arguments` the JSON text, `tool` results with
                    `tool_call_id` and `name`; an assistant message with `weight: 0` is context, not a target
    tools           JSON text of the OpenAI tools list the conversation had (parquet would merge every
                    tool's parameters into one struct; `astra_verl.training.sft_dataset` decodes it)
    variant         golden: the environment's (`env_registry.spec.Variant`, its right behaviour; a twin's
                    is its environment's, answerable); null in the other writers' rows
    augmentation    traj export: the task's augmentation mode (`data_synth.traj.records.Augmentation`:
                    base, diverse, complicate, persona); null in the other writers' rows
    num_tool_calls  the calls the conversation makes
    env_id, recovery, irrelevant_tools  golden only: the environment, the failed-call kind shown (or ""),
                                        a twin that shows only other domains' tools and answers without
                                        a call (`export-sft --no-tool-share`; not the `no_tool` variant)
    server_id, task_id, source, score   traj export and import-astra: the tool server, the task (or the
                                        conversation's content id), where it came from, the judge's score
    sft_version     `SFT_VERSION`: the reader (`astra_verl.training.sft_dataset.TrajSFTDataset`) refuses a
                    row of any other version, naming the commands above to write it again

Versions: 1 was `traj export`'s and `import-astra`'s own row; 2-4 golden's (3 added `no_tool`, 4
`variant`); 5 is this one record for all three; 6 gives each name one meaning: `variant` is only the
environment's (traj export's augmentation mode moved to `augmentation`, import-astra's "imported" to
null: `source` says it) and `no_tool` is `irrelevant_tools` (a `no_tool` variant is another thing).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import ConfigDict, Field

from astra_foundation.errors import UserError
from astra_foundation.strict import SettingsError, StrictModel
from env_registry.spec import Variant

SFT_VERSION = 6  # 6: `variant`, `augmentation`, `irrelevant_tools`; see the module docstring for the history

RecoveryKind = Literal["wrong_argument", "unknown_tool", "malformed"]

# What a reader tells the owner of a row of another version: the three commands that write one.
REEXPORT = (
    "write the parquet again with the command that made it: "
    "`python -m env_registry export-sft RL_PARQUET --output-file SFT` (golden demonstrations), "
    "`python -m data_synth traj export --out RUN` (synthesized trajectories) or "
    "`python -m data_synth traj import-astra FILE... --output-file SFT` (imported conversations)"
)


class SFTVersionError(UserError, ValueError):
    """An SFT parquet row was written by another version of the record (or before it had one)."""


class SFTFunction(StrictModel):
    section = "SFT row.messages.tool_calls.function"

    name: str
    arguments: str  # JSON text, as the model wrote it (chat templates accept text)


class SFTToolCall(StrictModel):
    section = "SFT row.messages.tool_calls"

    id: str
    type: Literal["function"] = "function"
    function: SFTFunction


class SFTMessage(StrictModel):
    """One chat message; the keys verl's dataset and the chat templates read, nothing else."""

    section = "SFT row.messages"

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: list[SFTToolCall] | None = None  # assistant
    tool_call_id: str | None = None  # tool: the call it answers
    name: str | None = None  # tool: the tool that answered
    weight: Literal[0, 1] | None = None  # assistant: 0 = context only (OpenAI's fine-tuning convention)


class SFTRecord(StrictModel):
    """One SFT parquet row (the module docstring says which writer fills which column)."""

    model_config = ConfigDict(use_enum_values=True)  # `variant` is the enum's text, in the row as on the wire
    section = "SFT row"

    messages: list[SFTMessage] = Field(min_length=1)
    tools: str
    variant: Variant | None = Field(default=None, strict=False)  # the environment's; read back as its text
    augmentation: str | None = None  # the trajectory task's augmentation mode
    num_tool_calls: int = Field(ge=0)
    env_id: str | None = None
    recovery: RecoveryKind | Literal[""] = ""  # "": no failed call shown
    irrelevant_tools: bool = False  # a golden twin: other domains' tools only, answered without a call
    server_id: str | None = None
    task_id: str | None = None
    source: str | None = None
    score: float | None = None
    sft_version: Literal[SFT_VERSION] = SFT_VERSION  # the one version constant

    @classmethod
    def build(
        cls, where: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]], **columns: Any
    ) -> SFTRecord:
        """The record of a conversation: `tools` encoded as JSON text, its calls counted. `where`
        names the conversation (an environment, a trajectory, an input line) in the error of a row
        that does not fit the record."""
        calls = sum(len(m.get("tool_calls") or []) for m in messages)
        try:
            return cls(messages=messages, tools=json.dumps(tools, ensure_ascii=False), num_tool_calls=calls, **columns)
        except SettingsError as exc:
            raise SettingsError(
                f"{where}: {exc} (a writer's bug: its row does not fit env_registry/sft_record.py's SFTRecord; "
                "fix the writer, or the record and its SFT_VERSION)"
            ) from exc

    def row(self) -> dict[str, Any]:
        """The parquet row: every column, each message with only the keys it has."""
        row = self.model_dump()  # in field order: `messages` and `tools` first, as verl's examples have them
        row["messages"] = [m.model_dump(exclude_none=True) for m in self.messages]
        return row


def check_version(found: Any, file: str, row: int) -> None:
    """Refuse a row whose `sft_version` is not this record's (None: the row has none)."""
    if found == SFT_VERSION:
        return
    had = "has no sft_version" if found is None else f"has sft_version {found!r}"
    raise SFTVersionError(
        f"{file}: row {row} {had}; this reader expects sft_version {SFT_VERSION} "
        f"(env_registry/sft_record.py); {REEXPORT}"
    )


def check_row(row: dict[str, Any], file: str, index: int) -> SFTRecord:
    """The record of a row read back from `file` (its record's columns; a column the record does not
    know, such as pandas' index, is not read), or a `SettingsError` naming the file, the row and
    what does not fit (the message and its key, e.g. a `weight` other than 0 or 1)."""
    try:
        return SFTRecord(**{k: v for k, v in row.items() if k in SFTRecord.model_fields})
    except SettingsError as exc:
        raise SettingsError(f"{file}: row {index}: {exc}") from exc
