"""The settings record of a synthesis pipeline: one strict model per step, readable from YAML.

`PipelineSettings` is the base of `data_synth.env.config.EnvConfig` and
`data_synth.traj.config.TrajConfig`: a mapping of sections, each a `StrictModel`, so a key a
section does not know, or a value of the wrong type, is an error naming the file, the section,
the key and the known keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml

from astra_foundation.strict import SettingsError, StrictModel

S = TypeVar("S", bound="PipelineSettings")


class PipelineSettings(StrictModel):
    renamed: ClassVar[dict[str, str]] = {}  # a section's old name -> its new one (refused, naming the new)

    @classmethod
    def from_dict(cls: type[S], raw: dict[str, Any] | None) -> S:
        """Each section read by its own model (its errors name it), then the whole (unknown sections refused)."""
        built = {}
        for old in set(raw or {}) & set(cls.renamed):
            new = cls.renamed[old]
            raise SettingsError(f"settings section {old!r} is now {new!r}: rename it (--set {new}.KEY=VALUE)")
        for name, value in dict(raw or {}).items():
            model = cls.model_fields[name].annotation if name in cls.model_fields else None
            is_section = isinstance(model, type) and issubclass(model, StrictModel)
            built[name] = model.from_mapping(value) if is_section else value
        return cls(**built)

    @classmethod
    def read_yaml(cls, path: str | Path | None) -> dict[str, Any]:
        """The mapping in a YAML file (None: no file, {}), checked as settings of this pipeline."""
        if path is None:
            return {}
        try:
            raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except yaml.YAMLError as exc:
            raise SettingsError(f"{path}: not YAML ({exc}); fix the file") from None
        if raw is not None and not isinstance(raw, dict):
            raise SettingsError(f"{path}: expected a mapping of sections")
        try:
            cls.from_dict(raw)
        except SettingsError as exc:
            raise SettingsError(f"{path}: {exc}") from exc
        return raw or {}

    @classmethod
    def from_yaml(cls: type[S], path: str | Path | None) -> S:
        return cls.from_dict(cls.read_yaml(path))

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()


def apply_sets(raw: dict[str, Any], sets: Sequence[str]) -> dict[str, Any]:
    """`raw` settings with each `--set SECTION.KEY=VALUE` (VALUE read as YAML) written in, in order;
    the result is checked when the pipeline's settings are built from it."""
    for item in sets:
        path, eq, value = item.partition("=")
        if not eq or "." not in path and path != "concurrency":
            raise SettingsError(f"--set expects SECTION.KEY=VALUE (e.g. verify.percentile=0), got {item!r}")
        parts = path.split(".")
        node = raw
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise SettingsError(f"--set {item}: {p} is a value, not a section")
        node[parts[-1]] = yaml.safe_load(value)
    return raw
