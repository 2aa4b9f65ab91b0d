"""Run interactions written for verl <= 0.7, through the environment hook.

verl removed its interaction system in 0.8 (`verl/interactions`, PR #6074). Interactions written
for it subclass `verl.interactions.base.BaseInteraction` and implement

    async start_interaction(instance_id, **interaction_kwargs) -> instance_id
    async generate_response(instance_id, messages, **interaction_kwargs)
        -> (should_terminate, response, turn_score, extra)
    async calculate_score(instance_id, **kwargs) -> float
    async finalize_interaction(instance_id, **kwargs) -> None

and are listed in a YAML file `{interaction: [{name, class_name, config}]}`; a row picks one by
`extra_info.interaction_kwargs.name`. Point `astra.rollout.interaction_config_path` at that file
and the same classes (with the one import changed, below) run inside `astra_tool_agent`:

- `start_interaction(request_id, **interaction_kwargs)` at episode start;
- when the assistant ends a turn without tool calls: `generate_response(...)`; its response is
  delivered as the next user turn (mask 0), its score goes to `turn_scores`, and
  `should_terminate` ends the episode after the response is appended (verl <= 0.7 order);
- at episode end: `calculate_score` and `finalize_interaction`; the score and the turn scores
  are the hook's final state in the episode log.

As in verl <= 0.7, `class_name` is a dotted path, `name` defaults to the class name without an
`Interaction` suffix, lower-cased, and the class is built as `cls(config=config)` with `name`
injected into `config`. verl 0.9.1 (the pin) has no `verl.interactions`, and we do not fake one
in `sys.modules`: an interaction subclasses `BaseInteraction` from this module instead (one
changed import line). The loader calls the four methods by name, so any class with them works;
a class that still imports `verl.interactions` gets a HookError that says which line to change.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import logging
from typing import Any
from uuid import uuid4

from omegaconf import OmegaConf

from .hooks import EnvironmentHook, EpisodeView, HookAction, HookError

logger = logging.getLogger(__name__)


class BaseInteraction:
    """The verl <= 0.7 interaction interface, for classes written against it."""

    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.name: str = config.get("name", "interaction_agent")

    async def start_interaction(self, instance_id: str | None = None, **kwargs) -> str:
        return instance_id or uuid4().hex

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs
    ) -> tuple[bool, str, float, dict[str, Any]]:
        """Default: end the conversation without feedback."""
        return True, "", 0.0, {}

    async def calculate_score(self, instance_id: str, **kwargs) -> float:
        return 0.0

    async def finalize_interaction(self, instance_id: str, **kwargs) -> None:
        return None


def _installed_verl() -> str:
    """The installed verl's version, read from its metadata: importing verl here would break the
    plugin's import rule (astra_verl.plugin: modules the agent loop imports do not import verl)."""
    try:
        return importlib.metadata.version("verl")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _import_failure(class_name: str, exc: Exception) -> str:
    """Why `class_name` could not be loaded; for an import of verl's removed interactions
    package, the one-line change that fixes it."""
    missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
    if missing in ("verl.interactions", "verl.interactions.base"):
        return (
            f"class {class_name} imports {missing}, which verl {_installed_verl()} does not have "
            "(verl removed it in 0.8); import BaseInteraction from astra_verl.rollout.verl_interaction instead"
        )
    return f"class {class_name} not found ({exc})"


def _default_name(class_name: str) -> str:
    simple = class_name.rsplit(".", 1)[-1]
    return (simple[: -len("Interaction")] if simple.endswith("Interaction") else simple).lower()


def load_interactions(path: str) -> dict[str, Any]:
    """Instantiate every interaction of a config file (`Interactions` keeps them per worker)."""
    try:
        cfg = OmegaConf.load(path)
    except (OSError, ValueError) as exc:
        raise HookError(f"interaction config {path}: cannot be read ({exc})") from exc
    items = cfg.get("interaction") if hasattr(cfg, "get") else None
    if items is None or not OmegaConf.is_list(items):
        raise HookError(f"interaction config {path}: expected a top-level list `interaction: [{{class_name, ...}}]`")
    interactions: dict[str, Any] = {}
    for i, item in enumerate(items):
        class_name = item.get("class_name")
        if not class_name or "." not in str(class_name):
            raise HookError(f"interaction config {path}: interaction[{i}].class_name must be a dotted path")
        module_name, _, attr = str(class_name).rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise HookError(
                f"interaction config {path}: interaction[{i}] {_import_failure(str(class_name), exc)}"
            ) from exc
        name = item.get("name") or _default_name(str(class_name))
        if name in interactions:
            raise HookError(f"interaction config {path}: duplicate interaction name {name!r}")
        raw_config = item.get("config")
        config = OmegaConf.to_container(raw_config, resolve=True) if raw_config is not None else {}
        config["name"] = name
        interactions[name] = cls(config=config)
        logger.info("astra-verl: interaction %r from %s", name, class_name)
    return interactions


class Interactions:
    """The interactions a rollout worker has loaded, by config path: each file is read and its
    classes built once per worker (`RolloutContext.interactions`), as verl <= 0.7 did."""

    def __init__(self) -> None:
        self._maps: dict[str, dict[str, Any]] = {}

    def load(self, path: str) -> dict[str, Any]:
        if path not in self._maps:
            self._maps[path] = load_interactions(path)
        return self._maps[path]

    def hook(self, path: str, name: str, kwargs: dict[str, Any]) -> VerlInteractionHook | None:
        """The hook running interaction `name` of the file at `path`; None when the file has none such."""
        interaction = self.load(path).get(name)
        return None if interaction is None else VerlInteractionHook(interaction, kwargs)


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return repr(value)


class VerlInteractionHook(EnvironmentHook):
    """One episode of a verl <= 0.7 interaction (the instance id is the episode's request id)."""

    def __init__(self, interaction: Any, kwargs: dict[str, Any]):
        super().__init__(kwargs)
        self.interaction = interaction
        self.name = str(kwargs.get("name") or getattr(interaction, "name", ""))
        self.instance_id: str | None = None
        self.turn_scores: list[float] = []
        self.turn_extras: list[Any] = []

    async def on_start(self, view: EpisodeView) -> HookAction | None:
        self.instance_id = await self.interaction.start_interaction(view.request_id, **self.kwargs)
        return None

    async def on_assistant_end(self, view: EpisodeView, content: str) -> HookAction | None:
        should_terminate, response, score, extra = await self.interaction.generate_response(
            self.instance_id, view.messages, **self.kwargs
        )
        if score is not None:
            self.turn_scores.append(float(score))
        self.turn_extras.append(_jsonable(extra))
        return HookAction(
            user_message=response if response or not should_terminate else None,
            terminate=bool(should_terminate),
            turn_score=None if score is None else float(score),
        )

    async def on_end(self, view: EpisodeView) -> dict[str, Any]:
        score = await self.interaction.calculate_score(self.instance_id)
        await self.interaction.finalize_interaction(self.instance_id)
        return {
            "interaction": self.name,
            "score": None if score is None else float(score),
            "turn_scores": self.turn_scores,
            "turn_extras": self.turn_extras,
        }
