"""The README's main job on the embedded default: `make demo` (no GPU, no API key).

Stages run in order and each prints what it did; the job grows as the parts land.
"""

from __future__ import annotations

import argparse
import time


def stage(title: str):
    print(f"\n== {title}", flush=True)
    return time.perf_counter()


def check_plugin() -> None:
    import verl  # noqa: F401  - loads astra_verl.plugin through the verl.plugins entry point
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

    loops = sorted(n for n in _agent_loop_registry if n.startswith("astra"))
    rewards = sorted(n for n in REWARD_MANAGER if n.startswith("astra"))
    print(f"agent loops registered by astra-verl: {loops}")
    print(f"reward managers registered by astra-verl: {rewards}")
    if not loops or not rewards:
        raise SystemExit("astra-verl did not register into verl; see the error log above")


def compose_recipe(name: str) -> None:
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = compose("ppo_trainer", overrides=[f"+recipe={name}"])
    a, r = cfg.actor_rollout_ref, cfg.algorithm
    print(
        f"recipe {name}: adv_estimator={r.adv_estimator} lr={a.actor.optim.lr} "
        f"kl_loss={a.actor.use_kl_loss} loss_agg={a.actor.loss_agg_mode} "
        f"agent_loop={a.rollout.agent.default_agent_loop} reward={cfg.reward.reward_manager.name} "
        f"max_assistant_turns={a.rollout.multi_turn.max_assistant_turns}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    t0 = stage("1. plugin registration")
    check_plugin()
    stage("2. recipe composition")
    compose_recipe("astra_grpo")
    print(f"\ndone in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
