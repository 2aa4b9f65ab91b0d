"""docs/environments.md's import examples are what the importers print: each `$ python -m ...`
shown in the "Importing ASTRA's released data" section on our fixtures is run, and every output line
shown (timings and random ids aside) and the exit status shown must match."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Importing ASTRA's released data"
GUIDE = REPO / "docs" / "environments.md"
_VARYING = [
    (re.compile(r"in \d+(\.\d+)? s\b"), "in <t> s"),
    (re.compile(r"TXN\d+"), "TXN<id>"),
    (re.compile(r"character \d+"), "character <n>"),
]


def _examples() -> list[tuple[str, list[str], int]]:
    """(command, output lines shown, exit status shown) of each example run on the fixtures."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n## ", len(SECTION))]
    out = []
    for block in re.findall(r"```text\n(.*?)```", section, flags=re.S):
        lines = block.replace("\\\n", " ").splitlines()
        if not lines[0].startswith("$ python -m ") or "path/to/" in lines[0]:
            continue  # an example on files this repository does not have
        status = lines.index("$ echo $?")
        out.append((lines[0][2:], [line for line in lines[1:status] if line], int(lines[status + 1])))
    return out


def _normal(line: str) -> str:
    for pattern, placeholder in _VARYING:
        line = pattern.sub(placeholder, line)
    return line.rstrip()


EXAMPLES = _examples()


def test_the_section_shows_both_importers():
    assert [shlex.split(cmd)[2] for cmd, _, _ in EXAMPLES] == ["env_registry", "data_synth"]


@pytest.mark.parametrize("command, shown, status", EXAMPLES, ids=["env_registry", "data_synth"])
def test_docs_example_prints_what_the_docs_show(tmp_path, command, shown, status):
    argv = [a.replace("/tmp/astra", str(tmp_path)) for a in shlex.split(command)]
    r = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, cwd=REPO, timeout=300)
    printed = {_normal(line.replace(str(tmp_path), "/tmp/astra")) for line in r.stdout.splitlines()}
    missing = [line for line in shown if "..." not in line and _normal(line) not in printed]
    assert not missing, (
        f"{GUIDE.name} lines not printed: {missing}\n--- stdout:\n{r.stdout}\n--- stderr:\n{r.stderr[-2000:]}"
    )
    assert r.returncode == status
