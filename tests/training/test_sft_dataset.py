"""`TrajSFTDataset` (astra_verl/training/sft_dataset.py) refuses a parquet row of another SFT record
version, or without one, before verl reads anything: the error names the file, the row, the version
found, the one expected and the commands that write the parquet again. A row of this version that
does not fit the record (a message weight other than 0 or 1) is refused naming the file, the row and
the message."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from astra_foundation.strict import SettingsError
from astra_verl.training.sft_dataset import TrajSFTDataset
from env_registry.sft_record import SFT_VERSION, SFTRecord, SFTVersionError

MESSAGES = [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."}]


def _row(**columns) -> dict:
    return {**SFTRecord.build("test", MESSAGES, [], variant="answerable").row(), **columns}


def _write(path, rows) -> str:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return str(path)


def test_rows_of_this_version_load(tmp_path, tiny_tokenizer):
    path = _write(tmp_path / "sft.parquet", [_row(), _row()])
    assert len(TrajSFTDataset(path, tiny_tokenizer, {"max_length": 256})) == 2


def test_a_row_of_another_version_is_refused_naming_file_row_versions_and_command(tmp_path, tiny_tokenizer):
    path = _write(tmp_path / "old.parquet", [_row(), _row(sft_version=4)])
    with pytest.raises(SFTVersionError) as err:
        TrajSFTDataset(path, tiny_tokenizer, {"max_length": 256})
    text = str(err.value)
    assert text.startswith(f"{path}: row 1 has sft_version 4; this reader expects sft_version {SFT_VERSION}")
    assert "python -m env_registry export-sft" in text and "python -m data_synth traj export" in text
    assert "python -m data_synth traj import-astra" in text


def test_a_parquet_without_versions_is_refused(tmp_path, tiny_tokenizer):
    bare = {k: v for k, v in _row().items() if k != "sft_version"}
    path = _write(tmp_path / "bare.parquet", [bare])
    with pytest.raises(
        SFTVersionError, match=rf"bare.parquet: row 0 has no sft_version; .* expects sft_version {SFT_VERSION}"
    ):
        TrajSFTDataset(path, tiny_tokenizer, {"max_length": 256})
    nulls = _write(tmp_path / "nulls.parquet", [_row(), _row(sft_version=None)])
    with pytest.raises(SFTVersionError, match=r"nulls.parquet: row 1 has no sft_version"):
        TrajSFTDataset(nulls, tiny_tokenizer, {"max_length": 256})


def test_a_row_that_does_not_fit_the_record_is_refused_naming_file_row_and_message(tmp_path, tiny_tokenizer):
    heavy = [MESSAGES[0], {**MESSAGES[1], "weight": 2}]
    path = _write(tmp_path / "weights.parquet", [_row(), _row(), _row(messages=heavy)])
    with pytest.raises(SettingsError) as err:
        TrajSFTDataset(path, tiny_tokenizer, {"max_length": 256})
    assert str(err.value).startswith(
        f"{path}: row 2: SFT row.messages.1: SFT row.messages.weight must be one of 0 or 1, got 2"
    )
    unknown = _write(tmp_path / "roles.parquet", [_row(messages=[{"role": "robot", "content": "Hi."}])])
    with pytest.raises(SettingsError, match=r"roles.parquet: row 0: SFT row.messages.0: .*role must be one of"):
        TrajSFTDataset(unknown, tiny_tokenizer, {"max_length": 256})


def test_weight_zero_masks_the_message_and_pandas_index_columns_are_not_read(tmp_path, tiny_tokenizer):
    context = [MESSAGES[0], {**MESSAGES[1], "weight": 0}, {"role": "user", "content": "Again."}, MESSAGES[1]]
    frame = pa.Table.from_pylist([_row(messages=context)]).to_pandas()
    frame.index = [7]  # a concatenation without ignore_index: the index becomes a column of the parquet
    frame.to_parquet(tmp_path / "indexed.parquet")
    assert "__index_level_0__" in pq.read_schema(tmp_path / "indexed.parquet").names
    item = TrajSFTDataset(str(tmp_path / "indexed.parquet"), tiny_tokenizer, {"max_length": 256})[0]
    live = item["attention_mask"].bool()
    trained = tiny_tokenizer.decode(item["input_ids"][live][item["loss_mask"][live].bool()])
    assert trained.count("Hello.") == 1  # the weight-0 reply is context, the last one the target
