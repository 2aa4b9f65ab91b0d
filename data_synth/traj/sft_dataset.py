"""verl's multi-turn SFT dataset, reading the `tools` column as JSON text.

Why: parquet stores a list of structs with one struct type, so tools with different parameter
names (every real tool list) come back from a nested column with every other tool's parameter
names filled in as `null`, and a chat template would render them into the prompt. The export
therefore writes `tools` as a JSON string per row, and this subclass decodes it before verl's
`MultiTurnSFTDataset` tokenizes. Everything else (per-turn tokenization, assistant-only loss
mask, padding, truncation, the whole-conversation sanity check) is verl's own code.

    python -m verl.trainer.sft_trainer ... \\
        data.train_files=RUN/sft.parquet \\
        data.custom_cls.path=pkg://data_synth.traj.sft_dataset data.custom_cls.name=TrajSFTDataset

Rows with parallel tool calls (several `tool` messages in a row) meet a verl limitation with
Qwen-style templates, which group consecutive tool results into one turn while verl tokenizes
turn by turn: verl's sanity check then fails unless `data.ignore_input_ids_mismatch=True`.
`export --parallel-calls drop` leaves such rows out instead.
"""

from __future__ import annotations

import json

from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset


class TrajSFTDataset(MultiTurnSFTDataset):
    def _read_files_and_process(self):
        super()._read_files_and_process()
        if self.tools is not None:
            self.tools = [json.loads(t) if isinstance(t, str) else t for t in self.tools]
