"""House rule: a function over 60 lines says why in its docstring.

A long function is sometimes the clearest form (an argparse table, a process's life in order); the
docstring must then say so, with "60" in the reason, so a reader knows it was chosen, not grown."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("astra_verl", "env_registry", "data_synth")
LIMIT = 60


def long_functions_without_a_reason(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > LIMIT and str(LIMIT) not in (ast.get_docstring(node) or ""):
                found.append(f"{node.name} ({length} lines, line {node.lineno})")
    return found


def test_the_check_finds_a_long_function_without_a_reason():
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    assert long_functions_without_a_reason(f"def f():\n{body}\n") == [f"f ({LIMIT + 1} lines, line 1)"]
    reasoned = f'def f():\n    """Over {LIMIT} lines because it is a table."""\n{body}\n'
    assert long_functions_without_a_reason(reasoned) == []


@pytest.mark.parametrize("package", PACKAGES)
def test_every_long_function_says_why(package):
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in sorted((ROOT / package).rglob("*.py"))
        if (found := long_functions_without_a_reason(path.read_text()))
    }
    assert not offenders, f"functions over {LIMIT} lines need a reason in their docstring: {offenders}"
