"""verl's multi-turn SFT dataset for our SFT parquet: the record's version and rows checked, `tools` decoded.

Every SFT writer builds its rows as `env_registry.sft_record.SFTRecord` (golden demonstrations,
`data_synth traj export`, `data_synth traj import-astra`), with its `SFT_VERSION`. A row of another
version, or without one, is refused before training starts, naming the file, the row, the version
found and the one expected, and the commands that write the parquet again: a column renamed or
added since would otherwise train silently on what it no longer means. Then every row is read back as
the record (`env_registry.sft_record.check_row`): a row that does not fit it (a message key, role or
weight it does not allow) is refused the same way, naming the file, the row and the message's field.

Why `tools` is JSON text: parquet stores a list of structs with one struct type, so tools with
different parameter names (every real tool list) come back from a nested column with every other
tool's parameter names filled in as `null`, and a chat template would render them into the prompt.
The writers therefore store `tools` as a JSON string per row, and this subclass decodes it before
verl's `MultiTurnSFTDataset` tokenizes. Everything else (per-turn tokenization, assistant-only loss
mask, padding, truncation, the whole-conversation sanity check) is verl's own code.

    python -m verl.trainer.sft_trainer ... \\
        data.train_files=RUN/sft.parquet \\
        data.custom_cls.path=pkg://astra_verl.training.sft_dataset data.custom_cls.name=TrajSFTDataset

Rows with parallel tool calls (several `tool` messages in a row) meet a verl limitation with
Qwen-style templates, which group consecutive tool results into one turn while verl tokenizes
turn by turn: verl's sanity check then fails unless `data.ignore_input_ids_mismatch=True`.
`python -m data_synth traj export --out RUN --set export.parallel_calls=drop` and
`python -m data_synth traj import-astra FILE... --output-file SFT --parallel-calls drop` leave such
rows out instead.

An assistant message with `weight: 0` (OpenAI's fine-tuning convention) is context, not a target:
its tokens get loss mask 0. The golden demonstrations mark a deliberately failed call so
(`env_registry.golden_sft`): the model learns to correct it, not to make it. A weight other than
0, 1 or absent is refused before training (`SFTMessage.weight`), e.g.
`sft.parquet: row 3: SFT row.messages.2: SFT row.messages.weight must be one of 0 or 1, got 2`.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import torch
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from env_registry.sft_record import check_row, check_version


def check_rows(parquet_file: str) -> None:
    """Every row of `parquet_file` is of this record's version (`SFTVersionError`; a file written
    before rows had one has no `sft_version` column), then fits the record (`SettingsError` naming
    the file, the row and the field). One read of the file serves both checks."""
    for index, row in enumerate(pq.read_table(parquet_file).to_pylist()):
        check_version(row.get("sft_version"), parquet_file, index)
        check_row(row, parquet_file, index)


class TrajSFTDataset(MultiTurnSFTDataset):
    def _read_files_and_process(self):
        for parquet_file in self.parquet_files:  # before verl reads them: a stale or bad file stops here
            check_rows(parquet_file)
        super()._read_files_and_process()
        if self.tools is not None:
            self.tools = [json.loads(t) if isinstance(t, str) else t for t in self.tools]

    def _process_single_message(self, index, message, full_message, tools=None, enable_thinking=None):
        input_ids, loss_mask, attention_mask, inputs = super()._process_single_message(
            index, message, full_message, tools=tools, enable_thinking=enable_thinking
        )
        if message.get("weight") == 0:  # 0 or 1 or absent: `check_rows` read every row as the record
            loss_mask = torch.zeros_like(loss_mask)
        return input_ids, loss_mask, attention_mask, inputs
