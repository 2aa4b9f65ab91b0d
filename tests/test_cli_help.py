"""Every command line the README names answers `--help` in a fresh interpreter, exit 0, with a usage
line a user can copy (`python -m <module>`, not a file name); a wrong first word is exit 2 with the
choices on stderr."""

from __future__ import annotations

import resource
import subprocess
import sys
import time

import pytest

CLIS = [
    "data_synth",
    "data_synth env",
    "data_synth env run",
    "data_synth traj",
    "data_synth traj run",
    "data_synth traj import-astra",
    "env_registry",
    "env_registry export-parquet",
    "astra_verl.eval",
    "astra_verl.eval envs",
    "astra_verl.inspect",
    "astra_verl.models",
    "astra_verl.demo",
    "astra_verl.tiny_model",
]


# The commands that draw progress bars: `-q/--quiet` turns them off, the same flag everywhere.
QUIET = {"data_synth env run", "data_synth traj run", "env_registry", "astra_verl.eval envs"}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("cli", CLIS)
def test_help_exits_0_with_a_usage_line_naming_the_module(cli):
    module = cli.split()[0]
    proc = _run(*cli.split(), "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith(f"usage: python -m {module}"), proc.stdout[:300]
    assert "Traceback" not in proc.stderr
    if cli in QUIET:
        assert "-q, --quiet" in proc.stdout, f"{cli} has no -q/--quiet"


def test_an_unknown_pipeline_is_exit_2_with_the_choices():
    proc = _run("data_synth", "bogus")
    assert proc.returncode == 2 and "error: unknown pipeline 'bogus'; choose one of: env, traj" in proc.stderr


# -- --help is quick: the heavy modules load only inside the commands that need them --------------

HEAVY = ("torch", "verl", "transformers", "bfcl_eval", "datasets", "pandas", "matplotlib", "sympy", "pyarrow")
HELP_CPU_S = 1.0
# More subcommands' --help, beside CLIS: each loads its own modules.
MORE = [
    "astra_verl.eval bfcl",
    "astra_verl.eval bfcl-replay",
    "astra_verl.eval bfcl-single",
    "astra_verl.eval tau",
    "astra_verl.eval tau-export",
    "astra_verl.models smollm2",
    "astra_verl.models qwen2.5-coder-0.5b",
    "astra_verl.models distinct-tokens",
    "data_synth env run",
    "env_registry generate",
    "env_registry recover-calls",
    "env_registry import-astra",
]


def _help_run(cli: str) -> tuple[subprocess.CompletedProcess, float, float]:
    """`--help` in a fresh interpreter: the process, its CPU seconds (user + system) and wall seconds.
    CPU time is the budget: on a shared machine wall time also measures the neighbours' load."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", *cli.split(), "--help"], capture_output=True, text=True, timeout=300
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def _imported(importtime_log: str) -> set[str]:
    return {line.rsplit("|", 1)[-1].strip() for line in importtime_log.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize(
    "cli",
    CLIS + MORE,
)
def test_help_prints_in_under_a_second_without_heavy_modules(cli):
    proc, cpu, wall = _help_run(cli)
    assert proc.returncode == 0, proc.stderr[-2000:]
    heavy = sorted({m.split(".")[0] for m in _imported(proc.stderr)} & set(HEAVY))
    assert not heavy, f"{cli} --help imports {heavy}"
    assert cpu < HELP_CPU_S, f"{cli} --help took {cpu:.2f} s of CPU ({wall:.2f} s wall)"


# -- Ctrl-C while a command's modules load: one line, exit 130, no traceback ----------------------

_INTERRUPTING = """
import importlib.abc, importlib.machinery, runpy, sys

class Interrupt(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name == TARGET else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        raise KeyboardInterrupt  # as if Ctrl-C landed while this module loads

TARGET = sys.argv[1]
sys.meta_path.insert(0, Interrupt())
sys.argv = sys.argv[2:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "module, argv",
    [
        ("astra_verl.eval.cli", ["astra_verl.eval", "bfcl", "--base-url", "http://127.0.0.1:9", "--model", "m"]),
        ("astra_verl.eval.bfcl_run", ["astra_verl.eval", "bfcl", "--base-url", "http://127.0.0.1:9", "--model", "m"]),
        ("astra_verl.eval.envs", ["astra_verl.eval", "envs", "--data", "x.parquet", "--model-path", "."]),
        ("astra_verl.inspect.html", ["astra_verl.inspect", "."]),
        ("data_synth.env.cli", ["data_synth", "env", "report", "--out", "."]),
        ("data_synth.env.merge", ["data_synth", "env", "report", "--out", "."]),
        ("data_synth.traj.run", ["data_synth", "traj", "funnel", "--out", "."]),
        ("env_registry.cli", ["env_registry", "--help"]),
        ("astra_verl.models.smollm2", ["astra_verl.models", "smollm2", "out"]),
        ("astra_verl.models.qwen_coder", ["astra_verl.models", "qwen2.5-coder-0.5b", "out"]),
    ],
)
def test_ctrl_c_during_start_up_imports_is_one_line_and_exit_130(module, argv, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPTING, module, *argv], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and proc.stderr.strip().startswith("interrupted"), proc.stderr[-2000:]
    assert len(proc.stderr.strip().splitlines()) == 1


def test_the_clis_copies_of_names_for_their_help_equal_the_originals():
    """The CLIs name a few constants of heavy modules in their flags' help without importing them."""
    from astra_verl.eval import cli as eval_cli
    from env_registry import cli as registry_cli
    from env_registry import cli_rl_flags
    from env_registry.export import DEFAULT_INTERACTION
    from env_registry.families.bfcl import CATEGORIES
    from env_registry.families.procedural import DOMAINS
    from env_registry.golden_sft import RECOVERY_KINDS
    from env_registry.importers.astra import DEFAULT_DOMAIN
    from env_registry.spec import ScenarioType

    assert eval_cli.CATEGORIES == CATEGORIES
    assert registry_cli.DOMAINS == tuple(DOMAINS)
    assert registry_cli.SCENARIO_TYPES == tuple(t.value for t in ScenarioType)
    assert registry_cli.RECOVERY_KINDS == tuple(RECOVERY_KINDS)
    assert registry_cli.DEFAULT_DOMAIN == DEFAULT_DOMAIN
    assert registry_cli.DEFAULT_INTERACTION == DEFAULT_INTERACTION
    from env_registry.recovery import Budget

    assert (cli_rl_flags.BUDGET.calls_per_tool, cli_rl_flags.BUDGET.seconds_per_row) == (
        Budget().calls_per_tool,
        Budget().seconds_per_row,
    )
