"""Stop a Hydra job before it starts when a setting the recipe marks required (`???`) was not given.

A recipe cannot write `actor_rollout_ref.model.path: ???` itself: merged over verl's config, a
`???` keeps verl's default (a 7B chat model's path). So the recipe adds its own required key and
points verl's at it (`path: ${astra.model_path}`, `astra.model_path: ???`); either key given on the
command line satisfies it. OmegaConf only fails when such a value is read, and verl reads the
model path first inside its Ray task runner, once the cluster is up. So recipes also name the
keys in a Hydra callback, which runs in the driver before the job:

    hydra:
      callbacks:
        astra_required_settings:
          _target_: astra_verl.required_settings.RequiredSettings
          keys: [actor_rollout_ref.model.path]

Hydra runs callbacks for `@hydra.main` apps only (main_ppo, the SFT trainer); a notebook that
composes with the compose API calls `missing_settings(cfg, keys)` itself.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationToMissingValueError, MissingMandatoryValue

__all__ = ["MissingSettingsError", "RequiredSettings", "missing_settings"]


class MissingSettingsError(SystemExit):
    """A required setting is still `???` when the job starts. A SystemExit (status 2, a usage
    error), because Hydra turns any Exception a callback raises into a warning and runs the job."""

    def __init__(self, message: str):
        super().__init__(2)
        self.message = message

    def __str__(self) -> str:
        return self.message


def missing_settings(config: DictConfig, keys: Sequence[str]) -> list[str]:
    """The dotted keys of `keys` that are absent, `???`, or interpolate a `???` in `config`."""
    missing = []
    for key in keys:
        try:
            value = OmegaConf.select(config, key, throw_on_missing=True)
        except (MissingMandatoryValue, InterpolationToMissingValueError):
            value = None
        if value is None:
            missing.append(key)
    return missing


class RequiredSettings(Callback):
    """Hydra callback: at job start, print what is missing and exit 2 when a listed key is missing."""

    def __init__(self, keys: Sequence[str]):
        self.keys = list(keys)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        missing = missing_settings(config, self.keys)
        if missing:
            overrides = " ".join(f"{k}=..." for k in missing)
            error = MissingSettingsError(
                f"error: the recipe requires {', '.join(missing)} and it was not given; add {overrides} "
                "to the command line (e.g. actor_rollout_ref.model.path=/path/to/checkpoint)"
            )
            print(error, file=sys.stderr, flush=True)
            raise error
