"""`SandboxConfig.packages`: named installed packages importable in sessions, nothing else of site-packages."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from astra_foundation.sandbox import Module, Program, SandboxConfig, SandboxError, describe_isolation, run_calls

PROBE = """
import json, os, sys

def probe(site, sibling_file, package_file):
    out = {}
    import mpmath
    out["mpmath"] = str(mpmath.mpf(2) ** 10)
    def attempt(key, fn):
        try:
            out[key] = fn()
        except Exception as exc:
            out[key] = type(exc).__name__
    attempt("list_site", lambda: len(os.listdir(site)))
    attempt("read_sibling", lambda: open(sibling_file).read(10))
    attempt("write_package", lambda: open(package_file, "a").write("x"))
    attempt("import_numpy", lambda: __import__("numpy").__name__)
    attempt("import_json", lambda: __import__("json").__name__)
    return out
"""


def _site_of(name: str) -> str:
    return os.path.dirname(os.path.dirname(importlib.util.find_spec(name).origin))


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_only_the_named_packages_are_readable_and_importable(backend):
    site = _site_of("mpmath")
    sibling = importlib.util.find_spec("numpy").origin  # numpy sits in the same site-packages
    assert os.path.dirname(os.path.dirname(sibling)) == site
    package_file = importlib.util.find_spec("mpmath").origin
    config = SandboxConfig(workers=1, backend=backend, packages=["mpmath"])
    (result,) = run_calls(
        Program((Module("p", PROBE),)),
        [("p", "probe", {"site": site, "sibling_file": sibling, "package_file": package_file})],
        config,
    )
    assert result.ok, result.message
    out = json.loads(result.output)
    assert out["mpmath"] == "1024.0"
    assert out["import_json"] == "json"  # the standard library still wins and works
    # bwrap: the rest of site-packages does not exist in the namespace; process: Landlock denies it
    assert out["list_site"] in ("PermissionError", "FileNotFoundError")
    assert out["read_sibling"] in ("PermissionError", "FileNotFoundError")
    assert out["write_package"] in ("PermissionError", "OSError")
    assert out["import_numpy"] == "ModuleNotFoundError"


def test_without_packages_nothing_outside_the_stdlib_imports():
    src = "def f():\n    import mpmath\n"
    (result,) = run_calls(Program((Module("p", src),)), [("p", "f", {})], SandboxConfig(workers=1))
    assert not result.ok and "No module named 'mpmath'" in result.message


def test_package_names_are_validated():
    assert SandboxConfig(packages=["mpmath", "mpmath"]).packages == ("mpmath",)
    assert SandboxConfig.from_dict({"packages": ["mpmath"]}).packages == ("mpmath",)
    with pytest.raises(TypeError, match="list of package names"):
        SandboxConfig(packages="mpmath")
    with pytest.raises(ValueError, match="top-level package name"):
        SandboxConfig(packages=["mpmath.libmp"])
    assert "importable packages (read-only): mpmath" in describe_isolation(SandboxConfig(packages=["mpmath"]))


def test_a_name_that_is_not_an_installed_package_fails_the_start():
    with pytest.raises(SandboxError, match="not installed"):
        run_calls(
            Program((Module("p", "def f():\n    return 1\n"),)),
            [("p", "f", {})],
            SandboxConfig(workers=1, packages=["no_such_package_astra"]),
        )


def test_a_module_file_is_refused():
    import astra_foundation.sandbox.launch as launch

    with pytest.raises(launch.SandboxUnavailable, match="module file"):
        launch.package_dirs(("typing_extensions",))


def tmp_package(tmp_path, monkeypatch, name: str, init: str, attribute: str) -> Program:
    """An installed package `name` under tmp_path (its `__init__.py` is `init`), and a program
    whose `f()` imports it and returns its `attribute`."""
    (tmp_path / name).mkdir()
    (tmp_path / name / "__init__.py").write_text(init)
    monkeypatch.syspath_prepend(str(tmp_path))
    return Program((Module("p", f"def f():\n    import {name}\n    return {name}.{attribute}\n"),))


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_a_package_installed_under_tmp_is_importable(backend, tmp_path, monkeypatch):
    # A clone (and its venv) under /tmp: the worker's own tmpfs /tmp must not hide the package.
    program = tmp_package(tmp_path, monkeypatch, "astra_tmp_pkg", "VALUE = 41 + 1\n", "VALUE")
    config = SandboxConfig(workers=1, backend=backend, packages=["astra_tmp_pkg"])
    (result,) = run_calls(program, [("p", "f", {})], config)
    assert result.ok, result.message
    assert json.loads(result.output) == 42


# ------------------------------------------------------------------ preload
PRELOAD_PROBE = """
import sys, time
def f():
    already = "mpmath" in sys.modules and "mpmath.libmp" in sys.modules
    t0 = time.perf_counter()
    import mpmath
    return {"already": already, "import_s": time.perf_counter() - t0, "file": mpmath.__file__,
            "value": str(mpmath.mpf(2) ** 10)}
"""


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_preloaded_modules_are_imported_before_the_session_starts(backend):
    config = SandboxConfig(workers=1, backend=backend, packages=["mpmath"], preload=["mpmath"])
    (result,) = run_calls(Program((Module("p", PRELOAD_PROBE),)), [("p", "f", {})], config)
    assert result.ok, result.message
    out = json.loads(result.output)
    assert out["already"] and out["value"] == "1024.0"
    assert out["file"].startswith("/proc/self/fd/")  # imported the way sessions import it: no host path
    # and a session of a pool without preload imports it itself
    (cold,) = run_calls(
        Program((Module("p", PRELOAD_PROBE),)),
        [("p", "f", {})],
        SandboxConfig(workers=1, backend=backend, packages=["mpmath"]),
    )
    assert cold.ok and not json.loads(cold.output)["already"]


@pytest.mark.parametrize("backend", ["bwrap", "process"])
def test_a_preload_function_runs_in_the_worker_and_not_on_import(backend, tmp_path, monkeypatch):
    # `module:function`: the module's import does no work (the host may import it: tau_sandbox);
    # the worker calls the function once before it forks, and sessions see what it did.
    init = "LOADED = []\n\ndef load():\n    LOADED.append('db')\n"
    program = tmp_package(tmp_path, monkeypatch, "astra_preload_pkg", init, "LOADED")
    loaded = SandboxConfig(
        workers=1, backend=backend, packages=["astra_preload_pkg"], preload=["astra_preload_pkg:load"]
    )
    (result,) = run_calls(program, [("p", "f", {})], loaded)
    assert result.ok, result.message
    assert json.loads(result.output) == ["db"]
    imported = SandboxConfig(workers=1, backend=backend, packages=["astra_preload_pkg"], preload=["astra_preload_pkg"])
    (plain,) = run_calls(program, [("p", "f", {})], imported)
    assert plain.ok and json.loads(plain.output) == []


def test_preload_names_are_validated():
    assert SandboxConfig(packages=["mpmath"], preload=["mpmath.libmp", "json"]).preload == ("mpmath.libmp", "json")
    with pytest.raises(ValueError, match="neither astra.sandbox.packages"):
        SandboxConfig(preload=["mpmath"])
    with pytest.raises(ValueError, match="not a module name"):
        SandboxConfig(packages=["mpmath"], preload=["mpmath..x"])
    with pytest.raises(ValueError, match="module:function"):
        SandboxConfig(packages=["mpmath"], preload=["mpmath:no-such"])
    assert SandboxConfig(packages=["mpmath"], preload=["mpmath:pi"]).preload == ("mpmath:pi",)
    with pytest.raises(TypeError, match="list of module names"):
        SandboxConfig(preload="json")
    assert "imported by the workers before forking sessions: json" in describe_isolation(
        SandboxConfig(preload=["json"])
    )


def test_a_preload_that_fails_fails_the_start_and_says_which():
    with pytest.raises(SandboxError, match="preload: 'mpmath.no_such_module' failed"):
        run_calls(
            Program((Module("p", "def f():\n    return 1\n"),)),
            [("p", "f", {})],
            SandboxConfig(workers=1, packages=["mpmath"], preload=["mpmath.no_such_module"]),
        )
