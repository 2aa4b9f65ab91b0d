"""Makes the `recipe` config group visible to every Hydra app, verl's main_ppo among them.

Hydra imports every module under the `hydra_plugins` namespace package at start-up; this one
appends the package that holds `recipe/*.yaml`, so `+recipe=astra_grpo` resolves both from a
wheel and from an editable install.
"""

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class AstraVerlSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="astra-verl", path="pkg://astra_verl_recipes")
