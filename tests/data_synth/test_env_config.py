"""`data_synth env`'s settings record: `--config FILE` (YAML, data_synth/env/config.py) and the
flags read into one `EnvConfig`; a flag given wins over the file; the manifest records the same
settings whichever way they were given, so a run started with flags resumes with the file."""

from __future__ import annotations

import json

import pytest
import yaml

from data_synth.env.cli import build_parser, load_settings
from data_synth.env.cli import main as env_main
from data_synth.env.config import EnvConfig

ENV_DRY = ["--responder", "data_synth.env.canned:respond", "-q"]


def _domains(folder):
    path = folder / "domains.jsonl"
    path.write_text("".join(json.dumps({"domain": d, "knowledge_corpus": ""}) + "\n" for d in ("travel", "retail")))
    return path


def _settings(run_dir):
    return {k: v["settings"] for k, v in json.loads((run_dir / "manifest.json").read_text())["steps"].items()}


def test_defaults_equal_the_flags_documented_defaults():
    cfg = load_settings(build_parser().parse_args(["run", "--out", "x"]))
    assert cfg == EnvConfig()
    assert (cfg.verify.percentile, cfg.tools.outer_retries, cfg.merge.retries, cfg.concurrency) == (90.0, 15, 20, 64)
    assert cfg.tools.complexity_scaling and cfg.publish.export and not cfg.publish.allow_scripted


def test_a_flag_given_wins_over_the_file_and_a_flag_left_out_keeps_it(tmp_path):
    path = tmp_path / "env.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "verify": {"percentile": 50, "min_quality": 0.2},
                "tools": {"inner_retries": 2, "complexity_scaling": True},
                "publish": {"export": True},
                "concurrency": 8,
            }
        )
    )
    argv = ["run", "--out", "x", "--config", str(path), "--percentile", "70", "--no-complexity-scaling"]
    cfg = load_settings(build_parser().parse_args([*argv, "--no-export", "--store", str(tmp_path / "s")]))
    assert cfg.verify.percentile == 70.0 and cfg.verify.min_quality == 0.2  # flag given / file kept
    assert cfg.tools.inner_retries == 2 and cfg.tools.complexity_scaling is False
    assert cfg.publish.export is False and cfg.publish.store == str(tmp_path / "s")
    assert cfg.concurrency == 8


@pytest.mark.parametrize(
    "raw, words",
    [
        ({"tools": {"inner_retry": 3}}, ["env config: tools", "inner_retry", "inner_retries"]),
        ({"verfy": {}}, ["verfy"]),
        ({"merge": {"retries": "many"}}, ["env config: merge", "retries"]),
    ],
)
def test_a_bad_config_file_is_one_line_and_exit_2_naming_the_key(tmp_path, capsys, raw, words):
    path = tmp_path / "env.yaml"
    path.write_text(yaml.safe_dump(raw))
    argv = ["decompose", "--out", str(tmp_path / "run"), "--config", str(path), "--mode", "domain"]
    assert env_main([*argv, "--input", str(_domains(tmp_path)), *ENV_DRY]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: settings: {path}") and all(w in err for w in words), err
    assert not (tmp_path / "run").exists()


def test_the_file_and_the_same_flags_record_the_same_settings_and_resume_each_other(tmp_path, capsys):
    domains = _domains(tmp_path)
    by_flags, by_file = tmp_path / "flags", tmp_path / "file"
    seed_flags = ["--mode", "domain", "--input", str(domains), "--samples", "2", "--hops", "2..3"]
    assert env_main(["decompose", "--out", str(by_flags), *seed_flags, *ENV_DRY]) == 0
    assert env_main(["necessity", "--out", str(by_flags), "--judge-temperature", "0.3", *ENV_DRY]) == 0
    config = tmp_path / "env.yaml"
    seeds = {"mode": "domain", "input": str(domains), "samples": 2, "hops": "2..3"}
    config.write_text(yaml.safe_dump({"inputs": seeds, "judge": {"temperature": 0.3}}))
    for command in ("decompose", "necessity"):
        assert env_main([command, "--out", str(by_file), "--config", str(config), *ENV_DRY]) == 0
    assert _settings(by_flags) == _settings(by_file)
    assert _settings(by_file)["env.decompose"]["samples"] == 2
    assert _settings(by_file)["env.necessity"]["judge_temperature"] == 0.3
    capsys.readouterr()
    # The run made with flags continues with the file: nothing redone, nothing refused.
    for command in ("decompose", "necessity"):
        assert env_main([command, "--out", str(by_flags), "--config", str(config), *ENV_DRY]) == 0
        assert f"env.{command}: 0 processed (0 ok, 0 rejected, 0 error), 4 already done" in capsys.readouterr().out
    # Another value in the file is refused like another flag would be.
    config.write_text(yaml.safe_dump({"inputs": {**seeds, "samples": 3}}))
    assert env_main(["decompose", "--out", str(by_flags), "--config", str(config), *ENV_DRY]) == 2
    assert "samples: 2 -> 3" in capsys.readouterr().err


def test_the_input_records_section_is_inputs_and_the_old_name_is_refused(tmp_path):
    """`seeds` named the input records here and a random seed everywhere else (#46 §3)."""
    from astra_foundation.strict import SettingsError
    from data_synth.env.config import EnvConfig

    assert EnvConfig.from_dict({"inputs": {"mode": "domain"}}).inputs.mode == "domain"
    with pytest.raises(SettingsError, match="settings section 'seeds' is now 'inputs'"):
        EnvConfig.from_dict({"seeds": {"mode": "domain"}})


@pytest.mark.parametrize("pipeline", ["env", "traj"])
def test_a_settings_file_that_is_not_yaml_is_one_line_and_exit_2(pipeline, tmp_path, capsys):
    from data_synth.__main__ import main

    config = tmp_path / "bad.yaml"
    config.write_text("inputs: {mode: [domain\n")
    step = "decompose" if pipeline == "env" else "chains"
    (tmp_path / "run").mkdir()
    assert main([pipeline, step, "--out", str(tmp_path / "run"), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config}: not YAML" in err and "Traceback" not in err
