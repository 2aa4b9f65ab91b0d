"""Evaluation errors (#46 §3): bfcl_eval imported only through `bfcl_package.bfcl_module` (no
folders inside site-packages); a user's error is a `UserError` (one line, exit 2) and a bug keeps
its traceback (no blanket `except ValueError`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from testkit import require

from astra_foundation.errors import UserError
from astra_verl.eval.results import ResultsFileError


def _bfcl_single():
    from astra_verl.eval import bfcl_single

    require(bfcl_single.missing_packages(), bfcl_single.INSTALL)
    return bfcl_single


def test_bfcl_single_imports_bfcl_eval_with_its_project_root_in_the_cache(tmp_path):
    """bfcl_eval's config makes result/score folders under BFCL_PROJECT_ROOT on import, by
    default inside site-packages: bfcl-single's data and request helpers set the root first."""
    _bfcl_single()
    code = (
        "import os, sys\n"
        "from astra_verl.eval import bfcl_single as bs\n"
        "entry = bs.load_entries(['simple_python'], limit=1)[0]\n"
        "bs.request(entry, 'fc')\n"
        "print(os.environ.get('BFCL_PROJECT_ROOT'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "BFCL_PROJECT_ROOT"} | {"HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    root = tmp_path / ".cache" / "astra_verl" / "bfcl"
    assert done.stdout.strip() == str(root)
    assert (root / "result").is_dir() and (root / "score").is_dir()


def test_the_guarded_accessor_keeps_a_root_the_user_set_and_takes_only_bfcl_eval(monkeypatch, tmp_path):
    from env_registry.families.bfcl_package import bfcl_module, project_root

    monkeypatch.setenv("BFCL_PROJECT_ROOT", str(tmp_path))
    assert project_root() == tmp_path
    with pytest.raises(ValueError, match="not a module of bfcl_eval"):
        bfcl_module("os")


def _single(tmp_path: Path, *extra: str) -> list[str]:
    model = tmp_path / "ckpt"
    model.mkdir(exist_ok=True)
    return ["bfcl-single", "--model-path", str(model), "--out", str(tmp_path / "run"), "-q", *extra]


def test_bfcl_single_unknown_ids_are_a_user_error_and_a_bug_keeps_its_traceback(tmp_path, capsys, monkeypatch):
    bs = _bfcl_single()
    from astra_verl.eval import cli

    assert cli.main(_single(tmp_path, "--categories", "simple_python", "--ids", "simple_python_99999")) == 2
    err = capsys.readouterr().err
    assert "no such entries in simple_python" in err and "check --ids" in err and "Traceback" not in err

    def broken(*args, **kwargs):
        raise ValueError("a bug in the entry loader")

    monkeypatch.setattr(bs, "load_entries", broken)
    with pytest.raises(ValueError, match="a bug in the entry loader"):  # not exit 2 and one line
        cli.main(_single(tmp_path, "--categories", "simple_python"))


def test_bfcl_single_results_of_another_model_are_a_user_error(tmp_path):
    bs = _bfcl_single()
    record = bs.SingleResult(id="simple_python_0", category="simple_python", style="fc", model="a", status="error",
                             valid=False, error="X: down")  # fmt: skip
    bs.results_file(tmp_path / "results.jsonl", "fc", "a").append(record)
    with pytest.raises(ResultsFileError, match="pass another --out") as e:
        bs.results_file(tmp_path / "results.jsonl", "fc", "b")
    assert isinstance(e.value, UserError)
    assert not issubclass(bs.BfclSingleError, UserError)  # the checker's pool misconfigured: a bug


def test_a_tau_results_record_that_is_not_one_is_a_user_error():
    from astra_verl.eval import tau_report

    with pytest.raises(UserError, match="rerun `eval tau` into a fresh --out"):
        tau_report.read_results([{"id": "retail/test/0:0", "task": 0}])
