"""The command-line convention (docs/cli.md), checked on every command line's `--help`: an endpoint
is `--base-url/--model` (a second one `--<name>-base-url/--<name>-model`), declared by
`add_llm_arguments`; each concept has one flag and each flag one meaning (`--out` a folder,
`--output-file` a file, `--timeout` an endpoint's, `--call-timeout` the sandbox's, `--model-path` a
checkpoint, `--force` "go on", `--sample N` a seeded draw, `--set` wherever `--config` is); an old
spelling is refused naming the new one; and a `UserError` raised inside a command is one line on
stderr and exit status 2."""

from __future__ import annotations

import re

import pytest

from astra_foundation.clikit import EXIT_INTERRUPTED, EXIT_USAGE, run_cli
from astra_foundation.errors import UserError


def _main(cli: str):
    if cli == "data_synth":
        from data_synth.__main__ import main
    elif cli == "env_registry":
        from env_registry.cli import main
    elif cli == "astra_verl.eval":
        from astra_verl.eval.cli import main
    elif cli == "astra_verl.models":
        from astra_verl.models.cli import main
    else:
        from astra_verl.inspect.cli import main
    return main


def _help(argv: list[str], capsys) -> str:
    cli, rest = argv[0], argv[1:]
    with pytest.raises(SystemExit) as exit_:
        _main(cli)([*rest, "--help"])
    assert exit_.value.code in (0, None)
    return capsys.readouterr().out


def _subcommands(text: str) -> list[str]:
    """The subcommands a `--help` lists (argparse indents each by 4 under its metavar)."""
    return re.findall(r"^    ([a-z][\w-]*)(?:\s{2,}|$)", text, flags=re.M)


# Each command line and the subcommands that must be there (the check runs on every one listed).
ROOTS = {
    ("data_synth", "env"): {"run", "decompose", "publish", "report"},
    ("data_synth", "traj"): {"run", "ingest", "graph", "interact", "judge", "export", "funnel", "import-astra"},
    ("env_registry",): {"generate", "add", "import-astra", "recover-calls", "export-parquet", "stats"},
    ("astra_verl.eval",): {"envs", "bfcl", "bfcl-single", "bfcl-export", "bfcl-replay", "tau", "tau-export"},
    ("astra_verl.models",): {"smollm2", "distinct-tokens"},
}
ROOTS[("data_synth", "traj")].add("variants")  # issue 49: tasks of the other behaviours
# Subcommands that talk to an endpoint: they take `--base-url` (or only the user model's).
ENDPOINT = {
    ("data_synth", "env", "run"),
    ("data_synth", "env", "decompose"),
    ("data_synth", "traj", "run"),
    ("data_synth", "traj", "graph"),
    ("data_synth", "traj", "variants"),
    ("data_synth", "traj", "interact"),
    ("env_registry", "import-astra"),
    ("env_registry", "recover-calls"),
    ("astra_verl.eval", "bfcl"),
    ("astra_verl.eval", "bfcl-single"),
    ("astra_verl.eval", "envs"),
    ("astra_verl.eval", "tau"),
}
SECOND = {("data_synth", "traj", "run"): ("agent", "judge", "user"), ("astra_verl.eval", "tau"): ("user",)}
SECOND |= {("data_synth", "traj", "judge"): ("judge",), ("astra_verl.eval", "tau-export"): ("user",)}
SECOND |= {("astra_verl.eval", "envs"): ("user",), ("env_registry", "export-parquet"): ("user",)}  # issue 49's LLM user
SECOND |= {("data_synth", "traj", "interact"): ("user",)}  # issue 49: missing-value trajectories' LLM user
OLD = ("--run-dir", "--override", "--llm-", "--sandbox-call-timeout", "--model-dir", "--write ")
KNOB_HELP = "OpenAI-compatible base URL(s)"  # add_llm_arguments' words: the flag was not declared by hand


def _every_command(capsys) -> dict[tuple[str, ...], str]:
    helps = {("astra_verl.inspect",): _help(["astra_verl.inspect"], capsys)}
    for root, must in ROOTS.items():
        top = _help(list(root), capsys)
        helps[root] = top
        listed = set(_subcommands(top))
        assert must <= listed, f"{' '.join(root)} --help lists {sorted(listed)}"
        for name in sorted(listed):
            helps[(*root, name)] = _help([*root, name], capsys)
    return helps


def test_every_command_line_spells_the_endpoint_output_and_overrides_one_way(capsys):
    helps = _every_command(capsys)
    assert len(helps) > 30
    for argv, text in helps.items():
        where = " ".join(argv)
        for old in OLD:
            assert old not in text, f"{where} --help still says {old}"
        prefixes = set(re.findall(r"--(?:([a-z]+)-)?base-url\b", text))
        for prefix in prefixes:
            model = f"--{prefix}-model" if prefix else "--model"
            assert model in text, f"{where}: {prefix or 'the'} endpoint has no {model}"
        if argv in ENDPOINT:
            assert "--base-url" in text and KNOB_HELP in text, (
                f"{where} takes an endpoint: --base-url from add_llm_arguments"
            )
        for name in SECOND.get(argv, ()):
            assert f"--{name}-base-url" in text and f"--{name}-model" in text, f"{where}: --{name}-base-url"


def _entries(text: str) -> dict[str, list[tuple[str, str]]]:
    """Each option of a `--help` -> [(its help group's title, its metavar and help text)]."""
    out: dict[str, list[tuple[str, str]]] = {}
    group, flag = "", None
    for line in text.splitlines():
        if re.match(r"^\S.*:$", line):
            group, flag = line[:-1], None
            continue
        m = re.match(r"^  (?:-\w, )?(--[a-z][\w-]*)(.*)$", line)
        if m:
            flag = m.group(1)
            out.setdefault(flag, []).append((group, m.group(2).strip()))
        elif flag and line.startswith("      "):
            g, said = out[flag][-1]
            out[flag][-1] = (g, f"{said} {line.strip()}")
        else:
            flag = None
    return out


# flag -> what every declaration of it must say (its metavar and help, lower-cased; one of these)
MEANING = {
    "--out": ("folder",),  # a command whose result is one file takes --output-file
    "--output-file": ("file",),
    "--call-timeout": ("seconds per tool call", "seconds per checker run"),  # the sandbox's limit per call
    "--force": ("continue a run directory made with other settings",),  # not "rebuild": --rebuild
    "--model-path": ("checkpoint",),
}


def test_each_concept_has_one_flag_and_each_flag_one_meaning(capsys):
    helps = _every_command(capsys)
    for argv, text in helps.items():
        where = " ".join(argv)
        entries = _entries(text)
        for flag, must in MEANING.items():
            for _group, said in entries.get(flag, []):
                assert any(m in said.lower() for m in must), f"{where}: {flag} says {said!r}, not {must}"
        for group, said in entries.get("--timeout", []):  # the endpoint's; another endpoint's is --<name>-timeout
            assert group.startswith("endpoint (") and "seconds per request" in said, f"{where}: --timeout {said!r}"
        for _group, said in entries.get("--sample", []):  # a seeded draw of N (a flag that takes a number)
            assert said.startswith(("N", "SAMPLE")), f"{where}: --sample takes N, here {said!r}"
        if "--config" in entries:  # a settings file comes with its one-setting override
            assert "--set" in entries, f"{where} takes --config but no --set SECTION.KEY=VALUE"


# (command line, an old spelling, its new one): parsing the old one is a usage error naming the new
RENAMED = [
    (["env_registry", "export-astra-rl", "--out", "x.jsonl"], "--out", "--output-file"),
    (["env_registry", "recover-calls", "f.jsonl", "--out", "x.jsonl"], "--out", "--output-file"),
    (["env_registry", "export-sft", "rl.parquet", "--out", "x.parquet"], "--out", "--output-file"),
    (["data_synth", "traj", "import-astra", "f.json", "--out", "x.parquet"], "--out", "--output-file"),
    (["astra_verl.eval", "bfcl-score", "r.jsonl", "--write", "x.jsonl"], "--write", "--output-file"),
    (["data_synth", "env", "run", "--out", "d", "--sandbox-call-timeout", "3"], "--sandbox-call-timeout", "--call-timeout"),
    (["data_synth", "env", "decompose", "--out", "d", "--mode", "domain", "--sample"], "--sample", "--bundled-input"),
    (["astra_verl.eval", "bfcl-replay", "--model-dir", "m"], "--model-dir", "--model-path"),
    (["astra_verl.models", "smollm2", "out", "--force"], "--force", "--rebuild"),
    (["astra_verl.eval", "tau-export", "--domain", "retail", "--split", "test", "--out", "d", "--timeout", "5"], "--timeout", "--user-timeout"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "old", "new"), RENAMED, ids=[f"{a[0]} {a[1]} {o}" for a, o, _ in RENAMED])
def test_an_old_flag_name_is_refused_naming_the_new_one(argv, old, new, capsys):
    with pytest.raises(SystemExit) as exit_:
        _main(argv[0])(argv[1:])
    assert exit_.value.code == EXIT_USAGE
    assert f"{old} is now {new}" in capsys.readouterr().err


def test_data_synth_env_takes_set_after_config(tmp_path):
    from data_synth.env.cli import build_parser, load_settings

    config = tmp_path / "env.yaml"
    config.write_text("verify: {percentile: 50}\nsandbox: {call_timeout_s: 2}\n")
    argv = ["run", "--out", str(tmp_path / "r"), "--config", str(config), "--set", "verify.percentile=0"]
    cfg = load_settings(build_parser().parse_args([*argv, "--set", "tools.inner_retries=2", "--call-timeout", "7"]))
    assert (cfg.verify.percentile, cfg.tools.inner_retries, cfg.sandbox.call_timeout_s) == (0, 2, 7.0)


def test_the_endpoint_flags_are_declared_once(capsys):
    """The same knobs with the same help wherever the whole client is taken (synthesis and evaluation)."""
    helps = _every_command(capsys)

    def knobs(text: str) -> set[str]:
        return set(
            re.findall(
                r"^  (--(?:base-url|model|api-key-env|timeout|retries|max-tokens|extra-body|no-cache)\b)", text, re.M
            )
        )

    synthesis = knobs(helps[("data_synth", "traj", "run")])
    evaluation = knobs(helps[("astra_verl.eval", "bfcl")])
    assert (
        synthesis
        == evaluation
        == {
            "--base-url",
            "--model",
            "--api-key-env",
            "--timeout",
            "--retries",
            "--max-tokens",
            "--extra-body",
            "--no-cache",
        }
    )


class _Locked(UserError):
    pass


def test_a_user_error_raised_inside_a_command_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    import env_registry.commands.stats as stats
    from env_registry.cli import main

    def refuses(args):
        raise _Locked(f"{args.store}: held by pid 4242; wait for it or stop it")

    monkeypatch.setattr(stats, "cmd_stats", refuses)
    assert main(["--store", str(tmp_path), "stats"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.splitlines() == [f"error: {tmp_path}: held by pid 4242; wait for it or stop it"]


def test_the_runner_catches_every_user_error_by_type_and_nothing_else(capsys):
    from env_registry.store import StoreLocked

    def raise_(exc: BaseException):
        def command() -> int:
            raise exc

        return command

    assert run_cli(raise_(StoreLocked("envs is open for writing by pid 7")), resumes=False) == EXIT_USAGE
    assert capsys.readouterr().err == "error: envs is open for writing by pid 7\n"
    with pytest.raises(RuntimeError):  # a bug keeps its traceback
        run_cli(raise_(RuntimeError("a bug")), resumes=False)
    with pytest.raises(ValueError):  # so does a ValueError: only UserErrors are the user's
        run_cli(raise_(ValueError("a bug")), resumes=False)


def test_ctrl_c_says_resume_for_a_command_that_resumes_and_start_again_otherwise(capsys):
    def interrupted() -> int:
        raise KeyboardInterrupt

    with pytest.raises(TypeError):  # every command declares which it is
        run_cli(interrupted)  # type: ignore[call-arg]
    assert run_cli(interrupted, resumes=True, saved="the results are kept") == EXIT_INTERRUPTED
    assert "interrupted: the results are kept; rerun the same command to resume" in capsys.readouterr().err
    assert run_cli(interrupted, resumes=False) == EXIT_INTERRUPTED
    assert "rerun the same command to start again" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["envs", "tau"])
def test_ctrl_c_in_a_resumable_evaluation_says_it_resumes(command, tmp_path, capsys, monkeypatch):
    """`eval envs` and `eval tau` keep each scored episode in their results file: Ctrl-C must not
    tell their users to start again."""
    from astra_verl.eval import cli

    def interrupted(args) -> int:
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, command, interrupted)
    argv = {"envs": ["--data", "d.parquet"], "tau": ["--domain", "retail"]}[command]
    assert cli.main([command, *argv, "--model-path", "m", "--out", str(tmp_path)]) == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert f"scored episodes are saved in {tmp_path}/results.jsonl; rerun the same command to resume" in err
    assert "start again" not in err


def test_one_helper_declares_an_endpoint_a_second_one_and_a_subset(monkeypatch):
    import argparse

    from astra_foundation.llm.config import ENDPOINT, LLMConfig, LLMSettingsError, add_llm_arguments

    monkeypatch.setenv("ASTRA_LLM_MODEL", "from-env")
    p = argparse.ArgumentParser()
    p.add_argument("--concurrency", type=int, default=64, help="records in flight")  # the command's own
    add_llm_arguments(p, shared=("concurrency",))
    add_llm_arguments(p, "judge", temperature=0.0, from_env=False)
    args = p.parse_args(["--base-url", "http://a/v1, http://b/v1", "--judge-model", "j", "--extra-body", '{"x": 1}'])
    cfg = LLMConfig.from_args(args)
    assert (cfg.base_urls, cfg.model, cfg.extra_body) == (["http://a/v1", "http://b/v1"], "from-env", {"x": 1})
    assert cfg.max_concurrency == 64  # the command's --concurrency serves the client too
    judge = LLMConfig.from_args(args, "judge")
    assert (judge.model, judge.temperature, judge.max_concurrency, judge.base_urls) == ("j", 0.0, 32, [])

    subset = argparse.ArgumentParser()
    add_llm_arguments(subset, only=ENDPOINT, from_env=False)
    assert LLMConfig.from_args(subset.parse_args(["--model", "m"])) == LLMConfig(model="m")  # the rest: defaults
    with pytest.raises(SystemExit):
        subset.parse_args(["--timeout", "3"])  # not taken here

    bad = p.parse_args(["--extra-body", "{x"])
    with pytest.raises(LLMSettingsError, match="--extra-body is not JSON") as e:
        LLMConfig.from_args(bad)
    assert isinstance(e.value, UserError)


def test_a_knob_the_command_already_declared_is_an_error_when_the_parser_is_built():
    """Not a flag silently dropped: a command's own `--timeout` (say, a tool call's) would
    otherwise set the endpoint's without a word."""
    import argparse

    from astra_foundation.llm.config import add_llm_arguments

    p = argparse.ArgumentParser()
    p.add_argument("--timeout", type=float, help="seconds per tool call")
    with pytest.raises(ValueError, match=r"already has \['--timeout'\]"):
        add_llm_arguments(p)
    with pytest.raises(ValueError, match=r"shared=\('concurrency',\) names knobs the parser does not have"):
        add_llm_arguments(argparse.ArgumentParser(), shared=("concurrency",))
    add_llm_arguments(p, only=("base-url", "model"))  # the clash left out: fine
