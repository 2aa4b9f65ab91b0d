"""The procedural family's tools as real Python modules, and their rendering into tool sources.

Each module here is one tool as a model would write it (typed signature, docstring, argument
checks with messages a model can act on), runnable and testable as it stands. A tool of an
environment is its module's text, rendered:

- the module docstring is dropped (it documents the template, not the tool);
- `from env_registry.families.tool_templates._<prelude> import ...` is replaced by that prelude's
  code (`_lookup`: the fuzzy name lookup, `_dates`: ISO date arguments), since a tool runs in
  the sandbox as one self-contained module;
- the annotated top-level constants (`_RECORDS: dict = {...}`) are the environment's data slots:
  each gets its value from `data` (all of them, and nothing else), written without annotation;
  plain constants are the same in every environment;
- the module's one public function takes the tool's name, its parameters the names in
  `params`, its docstring `doc`.

Renaming works on tokens, never inside strings; a rename that would collide with a name the
template already uses, or leave the old name behind, is refused.
"""

from __future__ import annotations

import ast
import io
import pprint
import re
import tokenize
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

__all__ = ["TemplateError", "literal", "render", "slots"]

_PRELUDE_IMPORT = re.compile(rf"^from {re.escape(__name__)}\.(_\w+) import [\w, ]+\n", re.M)
_BLANK_RUNS = re.compile(r"\n{4,}")


class TemplateError(ValueError):
    """A template cannot be rendered as asked (a bug in the generator or the template)."""


def literal(value: Any) -> str:
    """A Python literal of `value` as it appears in rendered sources."""
    return pprint.pformat(value, width=110, sort_dicts=False)


@cache
def _code(template: str) -> str:
    """The template's text without its docstring, with its preludes inlined."""
    text = resources.files(__package__).joinpath(f"{template}.py").read_text("utf-8")
    body = ast.parse(text).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        text = "".join(text.splitlines(keepends=True)[body[0].end_lineno :])
    text = _PRELUDE_IMPORT.sub(lambda m: _code(m.group(1)).rstrip("\n") + "\n\n\n", text.lstrip("\n"))
    imports: set[str] = set()  # a prelude and the template may import the same module
    lines = []
    for line in text.splitlines(keepends=True):
        if line.startswith("import "):
            if line in imports:
                continue
            imports.add(line)
        lines.append(line)
    return _BLANK_RUNS.sub("\n\n\n", "".join(lines))


def _rename(text: str, names: Mapping[str, str], template: str) -> str:
    lines = text.splitlines(keepends=True)
    tokens = [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type == tokenize.NAME]
    clash = {t.string for t in tokens} & (set(names.values()) - set(names))
    if clash:
        raise TemplateError(f"template {template}: renaming to {sorted(clash)} clashes with names it already uses")
    for tok in reversed(tokens):
        if tok.string in names:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col] + names[tok.string] + lines[row - 1][tok.end[1] :]
    return "".join(lines)


@dataclass(frozen=True)
class _Prepared:
    lines: tuple[str, ...]
    slots: dict[str, tuple[int, int]]  # data slot -> (first line, last line), 0-based
    doc: tuple[int, int, str]  # the tool function's docstring: first line, last line, indent


@cache
def _prepared(template: str, name: str, params: tuple[tuple[str, str], ...]) -> _Prepared:
    code = _code(template)
    public = [n for n in ast.parse(code).body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]
    if len(public) != 1:
        raise TemplateError(f"template {template} must define exactly one public function, found {len(public)}")
    renames = {public[0].name: name, **dict(params)}
    text = _rename(code, renames, template)
    tree = ast.parse(text)
    left = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
        a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)
    }
    if left & (set(renames) - set(renames.values())):
        raise TemplateError(
            f"template {template}: {sorted(left & set(renames))} survive the renaming (inside f-strings?)"
        )
    slots = {
        node.target.id: (node.lineno - 1, node.end_lineno - 1)
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    tool = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    first = tool.body[0]
    if not (
        isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str)
    ):
        raise TemplateError(f"template {template}: the tool function has no docstring")
    doc = (first.lineno - 1, first.end_lineno - 1, " " * first.col_offset)
    return _Prepared(tuple(text.splitlines(keepends=True)), slots, doc)


def slots(template: str) -> dict[str, Any]:
    """The template's data slots (its preludes' included) with the example values written there."""
    tree = ast.parse(_code(template))
    return {
        n.target.id: ast.literal_eval(n.value)
        for n in tree.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None
    }


def render(
    template: str,
    name: str,
    *,
    params: Mapping[str, str] | None = None,
    data: Mapping[str, Any] | None = None,
    doc: str | None = None,
) -> str:
    """The source of tool `name` from `template` (see the module docstring)."""
    prepared = _prepared(template, name, tuple(sorted((params or {}).items())))
    data = data or {}
    if set(data) != set(prepared.slots):
        raise TemplateError(
            f"template {template} has the data slots {sorted(prepared.slots)}; got values for {sorted(data)}"
        )
    edits = {prepared.slots[k]: [f"{k} = {literal(v)}\n"] for k, v in data.items()}
    if doc is not None:
        if '"""' in doc or "\\" in doc:
            raise TemplateError(f"a docstring for {name} must not contain triple quotes or backslashes")
        first, last, indent = prepared.doc
        body = doc.strip("\n").splitlines()
        text = '"""' + "\n".join(body[:1] + [indent + line if line else "" for line in body[1:]]) + '"""'
        edits[(first, last)] = [indent + text + "\n"]
    lines = list(prepared.lines)
    for (first, last), new in sorted(edits.items(), reverse=True):
        lines[first : last + 1] = new
    return "".join(lines)
