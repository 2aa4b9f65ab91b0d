"""Inputs of environment synthesis -> `Seed` records (docs/method.md §2.1's four modes).

    domain    JSONL {domain, knowledge_corpus}: write a task in the domain (corpus optional)
    context   JSONL {domain, knowledge_corpus}: a passage (background, known info, info needed)
    question  JSONL {question, domain}: decompose this question
    taxonomy  JSON {category: {leaf: {description, examples: [{query}]}}} (nested to any depth):
              one seed per leaf

Sample inputs (`sample_input`, CLI `--bundled-input`): a handful of records of each kind, written for
this project in ASTRA's formats (`samples/`: en/domains, zh/domains, en/context, en/questions,
taxonomy.json), so dry runs, tests and benchmarks need nothing from outside the package.
ASTRA's released inputs, or your own, come through `--input FILE`.

A line that cannot be read (not JSON, a field missing or empty) raises `SeedError`, or, when
`load_seeds` is given a `problems` list, is listed there with its file and line and skipped (the
CLI's policy: reject the line, go on, exit non-zero at the end). An input without any seed is
an error either way.

The key of a seed is `<mode>:<hash of domain and text>:<sample>`, so the same input gives the
same key in every run (resume, shards) and `samples` draws that many tasks per input. In the
domain and taxonomy modes each sample asks for one of the four scenario types, in turn from a
hash of the input, so a run covers them evenly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from data_synth.env.records import Mode, Seed

SAMPLES = Path(__file__).with_name("samples")
_SAMPLE_FILES: dict[tuple[str, str], str] = {
    ("domain", "en"): "en/domains.jsonl",
    ("domain", "zh"): "zh/domains.jsonl",
    ("context", "en"): "en/context.jsonl",
    ("question", "en"): "en/questions.jsonl",
    ("taxonomy", "en"): "taxonomy.json",
}
SCENARIO_TYPES = ("single_hop", "multi_hop", "parallel_single_hop", "parallel_multi_hop")
DEFAULT_HOPS: dict[str, tuple[int, int]] = {"context": (3, 5), "domain": (1, 6), "question": (1, 6), "taxonomy": (1, 6)}


class SeedError(ValueError):
    pass


def sample_input(mode: Mode, language: str = "en") -> Path:
    """The bundled sample input of `mode` in `language` (see the module docstring)."""
    name = _SAMPLE_FILES.get((mode, language))
    if name is None:
        have = ", ".join(f"{m}/{lang}" for m, lang in _SAMPLE_FILES)
        raise SeedError(f"no bundled sample for {mode} mode in language {language!r} (have {have}); pass --input FILE")
    return SAMPLES / name


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]


def _bad(problems: list[str] | None, message: str) -> None:
    """Raise for `message`, or list it when the caller collects problems."""
    if problems is None:
        raise SeedError(message)
    problems.append(message)


def _jsonl(path: Path, problems: list[str] | None) -> Iterator[tuple[int, dict[str, Any]]]:
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                _bad(problems, f"{path}:{n}: not JSON ({e.msg})")
                continue
            if not isinstance(row, dict):
                _bad(problems, f"{path}:{n}: expected an object")
                continue
            yield n, row


def _need(row: dict[str, Any], field: str, where: str) -> str:
    value = row.get(field)
    if not isinstance(value, str):
        raise SeedError(f"{where}: field {field!r} must be a string (got {type(value).__name__})")
    return value.strip()


def _taxonomy_leaves(node: Any, path: list[str]) -> Iterator[tuple[list[str], dict[str, Any]]]:
    if isinstance(node, dict) and isinstance(node.get("description"), str):
        yield path, node
        return
    if not isinstance(node, dict):
        raise SeedError(f"taxonomy node {'/'.join(path) or '(root)'} is neither a category nor a leaf")
    for name, child in node.items():
        yield from _taxonomy_leaves(child, [*path, name])


def _raw_inputs(mode: Mode, path: Path, problems: list[str] | None) -> Iterator[dict[str, Any]]:
    """`{domain, text, category, examples, source}` per input."""
    if mode == "taxonomy":
        try:
            tree = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise SeedError(f"{path}: not JSON ({e.msg})") from None
        for leaf_path, leaf in _taxonomy_leaves(tree, []):
            examples = [e["query"] if isinstance(e, dict) else str(e) for e in leaf.get("examples", []) if e]
            yield {
                "domain": leaf_path[0] if leaf_path else "general",
                "category": "/".join(leaf_path[1:]) or (leaf_path[0] if leaf_path else "general"),
                "text": leaf["description"],
                "examples": [str(e) for e in examples],
                "source": f"{path.name}:{'/'.join(leaf_path)}",
            }
        return
    for n, row in _jsonl(path, problems):
        where = f"{path}:{n}"
        field = "question" if mode == "question" else "knowledge_corpus"
        try:
            domain, text = _need(row, "domain", where), _need(row, field, where)
        except SeedError as e:
            _bad(problems, str(e))
            continue
        if mode in ("question", "context") and not text:
            _bad(problems, f"{where}: empty {'question' if mode == 'question' else 'passage'} ({field!r})")
            continue
        yield {"domain": domain, "text": text, "category": None, "examples": [], "source": f"{path.name}:{n}"}


def load_seeds(
    mode: Mode,
    path: str | Path,
    *,
    samples: int = 1,
    hops: tuple[int, int] | None = None,
    language: str = "en",
    limit: int | None = None,
    offset: int = 0,
    problems: list[str] | None = None,
) -> list[Seed]:
    path = Path(path)
    if not path.is_file():
        raise SeedError(f"input file {path} does not exist")
    hop_min, hop_max = hops or DEFAULT_HOPS[mode]
    if not 1 <= hop_min <= hop_max:
        raise SeedError(f"hop range {hop_min}..{hop_max}: need 1 <= MIN <= MAX")
    seeds: list[Seed] = []
    for i, raw in enumerate(_raw_inputs(mode, path, problems)):
        if i < offset:
            continue
        if limit is not None and i >= offset + limit:
            break
        digest = _digest(mode, raw["domain"], raw.get("category") or "", raw["text"])
        for s in range(samples):
            target = None
            if mode in ("domain", "taxonomy"):
                target = SCENARIO_TYPES[(int(digest[:8], 16) + s) % len(SCENARIO_TYPES)]
            seeds.append(
                Seed(
                    key=f"{mode}:{digest}:{s}",
                    mode=mode,
                    domain=raw["domain"],
                    text=raw["text"],
                    category=raw["category"],
                    examples=raw["examples"],
                    language=language,
                    hop_min=hop_min,
                    hop_max=hop_max,
                    target_type=target,
                    source=raw["source"],
                    sample=s,
                )
            )
    if not seeds:
        after = f" after skipping {offset} (--offset)" if offset else ""
        raise SeedError(f"{path}: no {mode} inputs{after}; the file is empty or every line was rejected")
    return seeds


def parse_hops(text: str | None) -> tuple[int, int] | None:
    """`"3..5"` -> (3, 5); None -> None (the mode's default)."""
    if not text:
        return None
    try:
        lo, hi = (int(x) for x in text.split(".."))
    except ValueError:
        raise SeedError(f"--hops must look like MIN..MAX (e.g. 3..5), not {text!r}") from None
    return lo, hi
