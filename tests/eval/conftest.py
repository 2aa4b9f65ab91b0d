"""Fixtures for the BFCL tests: a small sample of real BFCL entries in a real store, a sandbox config."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

# Two entries per category (miss_func_0 holds `sort` back until turn 3; long_context_1 has the long
# file system) and the base entry whose turn needs the most steps.
SAMPLE_IDS = [
    "multi_turn_base_0",
    "multi_turn_base_1",
    "multi_turn_miss_func_0",
    "multi_turn_miss_func_1",
    "multi_turn_miss_param_0",
    "multi_turn_miss_param_3",
    "multi_turn_long_context_0",
    "multi_turn_long_context_1",
]


@pytest.fixture(scope="session")
def bfcl_sample(tmp_path_factory) -> SimpleNamespace:
    """`BfclSet` of SAMPLE_IDS (entries, rows, targets) and its store location."""
    from astra_verl.benchmarks import bfcl_hook  # noqa: F401  - registers the hook
    from astra_verl.eval.bfcl_run import prepare

    store = tmp_path_factory.mktemp("bfcl") / "store"
    data = prepare(store, ids=SAMPLE_IDS)
    by_id = {e.id: i for i, e in enumerate(data.entries)}
    return SimpleNamespace(data=data, store=store, index=by_id, ids=list(SAMPLE_IDS))


@pytest.fixture(scope="module")
def loop_kit(tiny_model_dir, tiny_tokenizer):
    """The trainer config of `+recipe=astra_bfcl_eval` for the tiny model, on a shared pool of its own."""
    from astra_verl.eval import bfcl_replay
    from astra_verl.rollout.testing import close_worker_context

    # the tiny BPE is verbose: long-context episodes need room
    config = bfcl_replay.loop_config(
        str(tiny_model_dir), overrides=["data.max_prompt_length=32768", "data.max_response_length=32768"]
    )
    close_worker_context()  # other tests share verl's event loop with their own sandbox config
    yield config, tiny_tokenizer
    close_worker_context()


@pytest.fixture(scope="session")
def bfcl_sandbox_config():
    from astra_foundation.sandbox import SandboxConfig
    from astra_verl.benchmarks.bfcl_score import REQUIRED_PACKAGES

    return SandboxConfig(workers=2, packages=list(REQUIRED_PACKAGES), call_timeout_s=30.0, max_output_chars=200_000)
