"""Every recipe composes on verl's real config and carries its settings; sweeps compose too."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from testkit import REPO, run_python

RECIPES = sorted((REPO / "recipes" / "recipe").glob("*.yaml"))
PRIMARY = re.compile(r"^#\s*primary:\s*(\S+)", re.MULTILINE)


def primary_config(path: Path) -> str:
    """A recipe names the verl config it overrides (`# primary: ...`); main_ppo's by default."""
    m = PRIMARY.search(path.read_text())
    return m.group(1) if m else "ppo_trainer"


def leaves(d, prefix=""):
    for k, v in d.items():
        if not prefix and k in ("defaults", "hydra"):
            continue  # Hydra's composition list and its own settings (callbacks), not the job's
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            yield from leaves(v, key + ".")
        else:
            yield key, v


def compose(primary: str, overrides: list[str]):
    import verl  # noqa: F401  - registers the recipe search path, as main_ppo's import does
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        return hydra_compose(primary, overrides=overrides)


def test_there_are_recipes():
    names = {p.stem for p in RECIPES}
    assert "astra_grpo" in names


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_recipe_composes_and_carries_every_setting(recipe):
    from omegaconf import OmegaConf

    cfg = compose(primary_config(recipe), [f"+recipe={recipe.stem}"])
    body = yaml.safe_load(recipe.read_text()) or {}
    assert body, f"{recipe.name} is empty"
    for key, value in leaves(body):
        if isinstance(value, str) and "${" in value:
            continue  # interpolations resolve against the composed config; checked by resolving below
        if value == "???":
            parent, _, leaf = key.rpartition(".")
            assert OmegaConf.is_missing(OmegaConf.select(cfg, parent), leaf), f"{recipe.name}: {key} is not required"
            continue
        got = OmegaConf.select(cfg, key, throw_on_missing=False)
        if isinstance(got, (list, tuple)) or OmegaConf.is_list(got):
            got = list(got)
        assert got == value, f"{recipe.name}: {key} = {got!r}, recipe says {value!r}"
    OmegaConf.to_container(cfg, resolve=False)


def test_main_ppo_cli_prints_the_recipe_with_an_override(tmp_path):
    code = (
        "import sys; from verl.trainer.main_ppo import main; "
        "sys.argv=['main_ppo', '+recipe=astra_grpo', 'trainer.total_epochs=1', '--cfg', 'job']; main()"
    )
    proc = run_python(code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = yaml.safe_load(proc.stdout)
    assert cfg["trainer"]["total_epochs"] == 1
    assert cfg["algorithm"]["adv_estimator"] == "grpo"
    assert cfg["actor_rollout_ref"]["rollout"]["agent"]["default_agent_loop"] == "astra_tool_agent"
    assert cfg["reward"]["reward_manager"]["name"] == "astra_f1"


def test_multirun_sweep_over_a_recipe_parameter_composes_every_job():
    """`main_ppo -m +recipe=astra_grpo actor_rollout_ref.rollout.n=4,8`: Hydra's own sweeper
    splits the sweep; every job it would launch composes with its value."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    overrides = parser.parse_overrides(["+recipe=astra_grpo", "actor_rollout_ref.rollout.n=4,8"])
    jobs = BasicSweeper.split_arguments(overrides, max_batch_size=None)[0]
    assert len(jobs) == 2
    seen = []
    for job in jobs:
        cfg = compose("ppo_trainer", list(job))
        assert cfg.algorithm.adv_estimator == "grpo"
        seen.append(cfg.actor_rollout_ref.rollout.n)
    assert seen == [4, 8]


def test_a_recipe_resolves_in_a_fresh_interpreter_that_has_not_imported_verl(tmp_path):
    """Notebooks and sweepers compose before `import verl`: Hydra must find `recipe/` through its
    plugin scan alone, also in an editable install; an unknown group would silently become a
    plain `recipe: astra_grpo` key."""
    code = textwrap.dedent(
        """
        import importlib.util, os, sys
        from hydra import compose, initialize_config_dir
        config_dir = os.path.join(os.path.dirname(importlib.util.find_spec("verl").origin), "trainer", "config")
        with initialize_config_dir(config_dir=config_dir, version_base=None):
            cfg = compose("ppo_trainer", overrides=["+recipe=astra_grpo"])
        print("verl" in sys.modules, cfg.get("recipe"), cfg.reward.reward_manager.name)
        """
    )
    proc = run_python(code, cwd=tmp_path)  # not the repo root: its hydra_plugins/ would be found through the cwd
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["False", "None", "astra_f1"]


def test_a_required_setting_is_satisfied_by_either_key():
    from astra_verl.required_settings import missing_settings

    key = "actor_rollout_ref.model.path"
    assert missing_settings(compose("ppo_trainer", ["+recipe=astra_grpo"]), [key]) == [key]
    for override in (f"{key}=/models/x", "astra.model_path=/models/x"):
        assert missing_settings(compose("ppo_trainer", ["+recipe=astra_grpo", override]), [key]) == []


@pytest.mark.parametrize(
    "module,recipe,key",
    [
        ("verl.trainer.main_ppo", "astra_grpo_recall", "actor_rollout_ref.model.path"),
        ("verl.trainer.sft_trainer", "astra_sft", "model.path"),
    ],
)
def test_a_gpu_recipe_without_a_model_path_stops_before_the_job_starts(tmp_path, module, recipe, key):
    proc = subprocess.run(
        [sys.executable, "-m", module, f"+recipe={recipe}"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"error: the recipe requires {key} and it was not given" in proc.stderr
    assert "ray init kwargs" not in proc.stdout  # main_ppo prints it just before ray.init
