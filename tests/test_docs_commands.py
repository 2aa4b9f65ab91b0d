"""Every command the README and docs/ quote still runs: a reader copies them, so a renamed module,
subcommand, option, recipe, script or make target is a broken page.

Commands are read from ```bash blocks (comments, heredoc bodies and line continuations handled)
and from inline code spans that start like a command. Each of our command lines (`python -m
<module> [subcommand...]`, `python bench/<script>.py`) answers `--help` with exit 0, and every
option the page quotes appears in that help (or its parents': global options come before the
subcommand). verl's trainers are Hydra apps: their `+recipe=NAME` must be a recipe file. `make X`
must be a Makefile target, `bash scripts/X` and `pytest tests/...` files that exist. Other
programs (pip, tensorboard, vllm) are not ours to check.
"""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
# An inline code span is a command when it starts like one (prose spans such as `astra_f1` are not).
COMMAND_START = re.compile(r"^(\.venv/bin/)?(python -m |python bench/|torchrun |make |bash scripts/|pytest tests/)")
HYDRA_APPS = ("verl.trainer.main_ppo", "verl.trainer.sft_trainer")


def bash_commands(block: str) -> list[str]:
    """The commands of one bash block: continuations joined, heredoc bodies and comments dropped,
    `;`/`&&`/`|` split into separate commands."""
    out, heredoc_end = [], None
    for line in block.replace("\\\n", " ").splitlines():
        if heredoc_end is not None:
            heredoc_end = None if line.strip() == heredoc_end else heredoc_end
            continue
        if m := re.search(r"<<-?\s*'?(\w+)'?", line):
            heredoc_end = m.group(1)
        line = re.sub(r"(^|\s)#.*$", "", line)
        out += [part.strip() for part in re.split(r";|&&|\|", line) if part.strip()]
    return out


def page_commands(text: str) -> list[str]:
    """The commands a page quotes: every bash block's, and inline spans that start like one."""
    commands = [c for block in re.findall(r"```bash\n(.*?)```", text, re.S) for c in bash_commands(block)]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    commands += [span for span in re.findall(r"`([^`\n]+)`", prose) if COMMAND_START.match(span)]
    return [c for c in commands if COMMAND_START.match(c)]


def quoted() -> dict[str, list[str]]:
    """command -> the pages quoting it."""
    found: dict[str, list[str]] = {}
    for page in PAGES:
        for command in page_commands(page.read_text(encoding="utf-8")):
            found.setdefault(command, []).append(str(page.relative_to(REPO)))
    return found


QUOTED = quoted()


@functools.cache
def help_text(argv: tuple[str, ...]) -> str:
    """`argv --help` in a fresh interpreter; the test fails here when it does not exit 0."""
    proc = subprocess.run([sys.executable, *argv, "--help"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"{' '.join(argv)} --help: exit {proc.returncode}\n{proc.stderr[-1500:]}"
    return proc.stdout


def is_subcommand(word: str, helps: str) -> bool:
    """argparse lists a subcommand in `{a,b}` choices or as an indented name in its help."""
    choice = re.search(r"\{[^}]*\b" + re.escape(word) + r"\b[^}]*\}", helps)
    return bool(choice or re.search(r"^\s{2,}" + re.escape(word) + r"(\s|$)", helps, re.M))


def wants_subcommand(helps: str) -> bool:
    """The usage line ends in argparse's subparser form (`{a,b} ...` or `COMMAND ...`)."""
    usage = helps.split("\n\n", 1)[0]
    return bool(re.search(r"(\}|[A-Z])\s+\.\.\.(?!\])", usage))  # `[FILE ...]` is a list, not subparsers


def takes_value(flag: str, helps: str) -> bool:
    return bool(re.search(re.escape(flag) + r"[ =]\[?[A-Z{]", helps))


def check_our_cli(argv: list[str], rest: list[str]) -> None:
    """Walk `rest` as argparse would: options (with their values) and subcommands; every quoted
    option must be in the help of the command path it is given to or one of its parents."""
    path, helps = list(argv), [help_text(tuple(argv))]
    i = 0
    while i < len(rest):
        word = rest[i]
        if word == "...":
            return  # the page elides the rest of the command
        if word == "--":
            return  # what follows goes to another program unchanged (bench/demo_rise.py -> the demo)
        if word.startswith("-"):
            flag = word.split("=", 1)[0]
            assert any(re.search(re.escape(flag) + r"\b", h) for h in helps), f"{' '.join(path)}: no option {flag}"
            i += 2 if "=" not in word and takes_value(flag, helps[-1] + "".join(helps)) else 1
            continue
        if is_subcommand(word, helps[-1]):
            path.append(word)
            helps.append(help_text(tuple(path)))
        else:
            assert not wants_subcommand(helps[-1]), f"{' '.join(path)}: {word!r} is not one of its subcommands"
        i += 1


def check(command: str) -> None:
    words = shlex.split(command.replace(".venv/bin/python", "python"))
    if words[0] == "make":
        targets = re.findall(r"^([\w-]+):", (REPO / "Makefile").read_text(), re.M)
        assert all(w in targets for w in words[1:]), f"not a Makefile target: {words[1:]}"
    elif words[0] in ("bash", "pytest"):
        assert (REPO / words[1].split("::")[0]).exists(), f"no such file: {words[1]}"
    elif words[0] == "torchrun" or words[1:2] == ["-m"] and words[2] in HYDRA_APPS:
        recipes = [w.split("=", 1)[1] for w in words if w.startswith("+recipe=")]
        for name in ",".join(recipes).split(","):  # a sweep names several; `astra_sft*` a family
            assert list((REPO / "recipes" / "recipe").glob(f"{name}.yaml")), f"no recipe {name}"
    elif words[1] == "-m":
        check_our_cli(["-m", words[2]], words[3:])
    else:
        check_our_cli([words[1]], words[2:])


def test_the_pages_quote_commands():
    """The extraction works: the README's two commands and the pipelines' entry points are found."""
    for expected in ("make demo", "make test", "python -m env_registry --store runs/envs/store validate"):
        assert expected in QUOTED, f"{expected!r} not found in {sorted(QUOTED)[:20]}"


def test_the_extraction_handles_heredocs_comments_and_chains():
    block = "cat > t.json <<'EOF'\npython -m nope\nEOF\npython -m a --x 1 \\\n  --y 2   # note\nmake a && make b\n"
    assert bash_commands(block) == ["cat > t.json <<'EOF'", "python -m a --x 1    --y 2", "make a", "make b"]


@pytest.mark.parametrize("command", sorted(QUOTED), ids=lambda c: c[:60])
def test_a_quoted_command_still_runs(command):
    try:
        check(command)
    except AssertionError as exc:
        raise AssertionError(f"{command!r} (quoted in {', '.join(QUOTED[command])}): {exc}") from None
