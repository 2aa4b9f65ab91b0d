"""The hook of one episode: a registered hook by name, else an interaction written for verl <= 0.7.

`create_hook` is the one place that knows both sources (`hooks` registers ours,
`verl_interaction` adapts interactions listed in `astra.rollout.interaction_config_path`), so
neither of those modules imports the other's users.
"""

from __future__ import annotations

from typing import Any

from .hooks import EnvironmentHook, HookError, hook_factory, registered_hooks
from .verl_interaction import Interactions


def create_hook(
    interaction_kwargs: Any,
    *,
    default: str,
    interaction_config_path: str | None,
    interactions: Interactions | None = None,
) -> EnvironmentHook:
    """The hook for one episode, chosen by `interaction_kwargs["name"]` (else `default`);
    `interactions`: the worker's loaded interaction files (default: a fresh load)."""
    kwargs = dict(interaction_kwargs or {})
    name = kwargs.get("name") or default
    factory = hook_factory(name)
    if factory is not None:
        return factory(kwargs)
    if interaction_config_path:
        hook = (interactions or Interactions()).hook(interaction_config_path, name, kwargs)
        if hook is not None:
            return hook
    where = f" or in {interaction_config_path}" if interaction_config_path else ""
    raise HookError(
        f"interaction_kwargs.name is {name!r}, which is not a registered hook ({registered_hooks()}){where}; "
        "register it with @register_hook or list it in astra.rollout.interaction_config_path"
    )
