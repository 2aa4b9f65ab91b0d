"""The recipes' string imports respect the layers: every `pkg://` module a recipe names (verl loads
it by that string, which `lint-imports` cannot see) is one of ours and importable, and training
code lives in astra_verl (or below it): a recipe that loads from the synthesis pipelines
(`data_synth`) is refused, as `.importlinter` refuses astra_verl importing it."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
PREFIX = "pkg://"
# what a training recipe may load: the verl plugin and the layers under it (.importlinter)
TRAINING_PACKAGES = ("astra_verl", "env_registry", "astra_foundation")
OURS = (*TRAINING_PACKAGES, "data_synth")


def _strings(node: Any, where: str) -> Iterator[tuple[str, str, Any]]:
    """(where, the string, the mapping holding it) for every `pkg://` string under `node`."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and value.startswith(PREFIX):
                yield f"{where}.{key}", value, node
            else:
                yield from _strings(value, f"{where}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, f"{where}[{i}]")


def module_problems(recipe: str, text: str) -> list[str]:
    """Why each `pkg://` string of a recipe may not be loaded by training (none: all fine)."""
    problems = []
    for where, value, holder in _strings(yaml.safe_load(text) or {}, recipe):
        module = value[len(PREFIX) :]
        top = module.split(".")[0]
        if top not in OURS:
            problems.append(f"{where}: {value} is not one of our packages {list(OURS)}")
            continue
        if top not in TRAINING_PACKAGES:
            problems.append(
                f"{where}: {value} loads from {top}, the synthesis pipelines; training code lives in astra_verl "
                f"(or below it: {list(TRAINING_PACKAGES)}), so move the module there"
            )
            continue
        try:
            loaded = importlib.import_module(module)
        except ImportError as exc:
            problems.append(f"{where}: {value} does not import: {exc}")
            continue
        name = holder.get("name")
        if isinstance(name, str) and not hasattr(loaded, name):
            problems.append(f"{where}: {value} has no {name!r} (the `name` beside it)")
    return problems


def _recipes() -> list[Path]:
    return sorted((ROOT / "recipes").rglob("*.yaml"))


def test_every_pkg_module_of_the_recipes_is_ours_importable_and_in_the_training_layers():
    found = {value for p in _recipes() for _, value, _ in _strings(yaml.safe_load(p.read_text()), "")}
    assert {"pkg://astra_verl.training.sft_dataset", "pkg://astra_verl.training.sampler"} <= found  # both are seen
    problems = [q for p in _recipes() for q in module_problems(str(p.relative_to(ROOT)), p.read_text())]
    assert problems == []


def test_a_recipe_loading_from_the_synthesis_pipelines_is_refused():
    text = "data:\n  custom_cls:\n    path: pkg://data_synth.traj.export_sft\n    name: SFTExportConfig\n"
    (problem,) = module_problems("recipes/recipe/x.yaml", text)
    assert problem.startswith("recipes/recipe/x.yaml.data.custom_cls.path: pkg://data_synth.traj.export_sft loads")
    assert "training code lives in astra_verl" in problem


def test_a_recipe_loading_what_is_not_ours_or_not_there_is_refused():
    text = "a:\n  path: pkg://os.path\nb:\n  - path: pkg://astra_verl.training.nowhere\nc:\n  path: pkg://astra_verl.training.sft_dataset\n  name: Nothing\n"
    problems = module_problems("r.yaml", text)
    assert [p.split(":")[0] for p in problems] == ["r.yaml.a.path", "r.yaml.b[0].path", "r.yaml.c.path"]
    assert "not one of our packages" in problems[0] and "does not import" in problems[1]
    assert "has no 'Nothing'" in problems[2]
