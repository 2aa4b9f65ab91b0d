"""A run directory's manifest: what each step was run with, so a rerun cannot silently mix runs.

`<run_dir>/manifest.json` records, per step, the settings that decide what a record becomes
(mode, prompts' inputs, thresholds, the model's name) and a digest of every input file. A step
that is run again with other settings would append records made one way to records made
another, and `run_step` would skip the old ones as done: the two runs mix without a trace.
So `record_settings` refuses a rerun whose settings differ, naming each difference, unless
`force` (then the new settings are recorded and the change is kept in `history`).

What is not fingerprinted, on purpose: what only selects or paces records (`--limit`,
`--offset`, `--shard`, concurrency, Ray, progress bars) and where the model is served (URLs,
keys): extending a run with a larger `--limit`, or moving the server, is a rerun of the same run.

    record_settings(run_dir, "env", {"env.decompose": {"mode": "context", "input": file_digest(path), ...}})
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from astra_foundation.errors import UserError
from astra_foundation.strict import SettingsError, StrictModel

__all__ = [
    "MANIFEST_FILE",
    "ManifestError",
    "RunManifest",
    "StepSettings",
    "differences",
    "file_digest",
    "forget_steps",
    "record_settings",
]

MANIFEST_FILE = "manifest.json"
MANIFEST_VERSION = 1


class ManifestError(UserError, ValueError):
    """The run directory was made with other settings, or its manifest cannot be read."""


class StepSettings(StrictModel):
    section = "manifest.json steps.<step>"

    settings: dict[str, Any]
    fingerprint: str
    first_run: float
    last_run: float


class Change(StrictModel):
    section = "manifest.json history[]"

    time: float
    step: str
    forced: bool
    differences: list[str]


class RunManifest(StrictModel):
    section = "manifest.json"

    version: int = MANIFEST_VERSION
    pipeline: str
    steps: dict[str, StepSettings] = Field(default_factory=dict)
    history: list[Change] = Field(default_factory=list)


def fingerprint(settings: Mapping[str, Any]) -> str:
    canonical = json.dumps(settings, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def file_digest(path: str | Path) -> str:
    """`sha256:<first 16 hex>` of a file's bytes, or `missing` (a missing input is a setting too)."""
    path = Path(path)
    if not path.is_file():
        return "missing"
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return f"sha256:{h.hexdigest()[:16]}"


def differences(old: Mapping[str, Any], new: Mapping[str, Any], prefix: str = "") -> list[str]:
    """`key: old -> new` for every leaf that differs (nested mappings are walked)."""
    out = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key, "(unset)"), new.get(key, "(unset)")
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {json.dumps(a, default=str)} -> {json.dumps(b, default=str)}")
    return out


def _path(run_dir: str | Path) -> Path:
    return Path(run_dir) / MANIFEST_FILE


def read_manifest(run_dir: str | Path, pipeline: str) -> RunManifest:
    path = _path(run_dir)
    if not path.exists():
        return RunManifest(pipeline=pipeline)
    try:
        manifest = RunManifest.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValidationError, SettingsError) as e:
        raise ManifestError(
            f"{path} is not a valid run manifest ({e.errors()[0]['msg'] if isinstance(e, ValidationError) else e}); "
            "restore it or use a new --out"
        ) from None
    if manifest.pipeline != pipeline:
        raise ManifestError(
            f"{run_dir} is a run directory of the {manifest.pipeline!r} pipeline, not {pipeline!r}; use another --out"
        )
    return manifest


def _write(run_dir: str | Path, manifest: RunManifest) -> None:
    path = _path(run_dir)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(manifest.model_dump_json(indent=2), encoding="utf-8")
    os.replace(tmp, path)


def record_settings(
    run_dir: str | Path, pipeline: str, steps: Mapping[str, Mapping[str, Any]], *, force: bool = False
) -> None:
    """Check `steps` (step name -> settings) against the manifest and record them; raise
    ManifestError naming every difference when a step was run with other settings (unless `force`)."""
    manifest = read_manifest(run_dir, pipeline)
    now = time.time()
    steps = {step: json.loads(json.dumps(s, default=str)) for step, s in steps.items()}  # as the file holds them
    changed: dict[str, list[str]] = {}
    for step, settings in steps.items():
        seen = manifest.steps.get(step)
        if seen is not None and seen.fingerprint != fingerprint(settings):
            changed[step] = differences(seen.settings, settings)
    if changed and not force:
        lines = [f"  {step}: {d}" for step, diffs in changed.items() for d in diffs]
        raise ManifestError(
            f"{run_dir} was run with other settings ({_path(run_dir)}):\n"
            + "\n".join(lines)
            + "\nits records would mix with this run's. Rerun with the recorded settings, use a new --out, "
            "redo the step (--redo), or pass --force to continue with the new settings (records already done "
            "stay as they were made)"
        )
    for step, settings in steps.items():
        seen = manifest.steps.get(step)
        manifest.steps[step] = StepSettings(
            settings=settings,
            fingerprint=fingerprint(settings),
            first_run=seen.first_run if seen else now,
            last_run=now,
        )
        if step in changed:
            manifest.history.append(Change(time=now, step=step, forced=True, differences=changed[step]))
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    _write(run_dir, manifest)


def forget_steps(run_dir: str | Path, pipeline: str, steps: list[str]) -> None:
    """Drop the recorded settings of `steps` (their records were moved aside by a redo)."""
    if not _path(run_dir).exists():
        return
    manifest = read_manifest(run_dir, pipeline)
    for step in steps:
        manifest.steps.pop(step, None)
    _write(run_dir, manifest)
