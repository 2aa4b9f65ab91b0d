"""`astra_verl.models.distinct_tokens`: template tokens a checkpoint cannot tell apart get rows of
their own; every other row, the tokenizer and a checkpoint without such tokens stay as they are.
(The real case, Qwen2.5-Coder-0.5B's tool tags, is checked in tests/models/test_qwen_coder.py.)"""

from __future__ import annotations

import shutil

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from astra_verl.models.distinct_tokens import RECORD, distinguish
from astra_verl.models.errors import BuildError


@pytest.fixture()
def twin_tags(tiny_model_dir, tmp_path):
    """The tiny model with `</tool_call>`'s row made a copy of `<tool_call>`'s, as in Qwen's file."""
    src = tmp_path / "twins"
    shutil.copytree(tiny_model_dir, src)
    tokenizer = AutoTokenizer.from_pretrained(str(src))
    model = AutoModelForCausalLM.from_pretrained(str(src))
    rows = model.get_input_embeddings().weight
    with torch.no_grad():
        rows[tokenizer.convert_tokens_to_ids("</tool_call>")] = rows[tokenizer.convert_tokens_to_ids("<tool_call>")]
    model.save_pretrained(str(src))
    return src


def _rows(path):
    return AutoModelForCausalLM.from_pretrained(str(path)).get_input_embeddings().weight.detach()


def test_twin_tags_get_the_mean_of_their_pieces_and_nothing_else_changes(twin_tags, tiny_model_dir, tmp_path):
    out, fixes = distinguish(twin_tags, tmp_path / "out")
    assert out == (tmp_path / "out").resolve() and (out / RECORD).exists()
    assert {(f.token, f.twin, f.cosine) for f in fixes} == {("<tool_call>", "</tool_call>", 1.0), ("</tool_call>", "<tool_call>", 1.0)}  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(str(out))
    before, after = _rows(twin_tags), _rows(out)
    fixed = {f.token_id for f in fixes}
    for f in fixes:
        assert f.pieces[0] == "<" and len(f.pieces) > 1  # "<" + the rest, in ordinary tokens
        assert torch.allclose(after[f.token_id], before[tokenizer.convert_tokens_to_ids(f.pieces)].mean(dim=0))
    opened, closed = (after[tokenizer.convert_tokens_to_ids(t)] for t in ("<tool_call>", "</tool_call>"))
    assert torch.nn.functional.cosine_similarity(opened, closed, dim=0) < 0.999
    others = [i for i in range(len(before)) if i not in fixed]
    assert torch.equal(after[others], before[others])
    assert (out / "tokenizer.json").read_bytes() == (twin_tags / "tokenizer.json").read_bytes()
    # a rerun reuses the folder; a folder made from another checkpoint is refused, not overwritten
    mtime = (out / "model.safetensors").stat().st_mtime_ns
    assert distinguish(twin_tags, out) == (out, fixes) and (out / "model.safetensors").stat().st_mtime_ns == mtime
    with pytest.raises(BuildError, match="made from"):
        distinguish(tiny_model_dir, out)


def test_a_checkpoint_whose_tokens_are_distinct_is_used_as_it_is(tiny_model_dir, tmp_path):
    assert distinguish(tiny_model_dir, tmp_path / "out") == (tiny_model_dir.resolve(), [])
    assert not (tmp_path / "out").exists()


def test_the_command_says_what_it_changed_and_refuses_a_folder_that_is_no_checkpoint(twin_tags, tmp_path, capsys):
    from astra_verl.models.cli import main

    assert main(["distinct-tokens", "--model-path", str(twin_tags), str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "<tool_call>: was cosine 1.000 to </tool_call>; now the mean of < + " in out
    assert f"start the SFT from {(tmp_path / 'out').resolve()}" in out
    assert main(["distinct-tokens", "--model-path", str(tmp_path / "nothing"), str(tmp_path / "o2")]) == 2
    assert "not a Hugging Face checkpoint folder (no config.json)" in capsys.readouterr().err
    assert not (tmp_path / "o2").exists()
