"""Versioned prompt files.

A prompt file is Markdown with a front-matter header and named sections:

    ---
    name: env.decompose
    version: 3
    ---
    ## system
    You write ...
    ## user.context
    Passage: $passage

Sections are rendered with `string.Template` (`$name` / `${name}`; a literal dollar is `$$`),
so JSON examples with braces need no escaping; a missing variable is an error. A rendered
section ends with one newline, unless the header says `strip: true`: then white space around
the rendered text is removed (the trajectory prompts' convention, kept so that their rendered
text, and with it the LLM cache keys of earlier runs, stay the same). Bump `version`
whenever a change could change outputs: the version string (`env.decompose@3`) goes into
every record's provenance, and into the LLM cache key through the prompt text itself.

    p = load_prompt("env/decompose")
    messages = p.messages("user.context", passage=text, hop_min=3, hop_max=5)
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

PROMPT_DIR = Path(__file__).resolve().parent
_SECTION = re.compile(r"^## +([A-Za-z0-9_.-]+) *$", re.MULTILINE)


class PromptError(ValueError):
    pass


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    sections: dict[str, str]
    path: Path
    strip: bool = False

    @property
    def tag(self) -> str:
        return f"{self.name}@{self.version}"

    def render(self, section: str, **variables: Any) -> str:
        if section not in self.sections:
            raise PromptError(f"{self.path}: no section '## {section}' (sections: {sorted(self.sections)})")
        try:
            text = string.Template(self.sections[section]).substitute({k: str(v) for k, v in variables.items()})
        except KeyError as e:
            raise PromptError(f"{self.path}: section {section!r} needs variable {e.args[0]!r}") from None
        except ValueError as e:
            raise PromptError(f"{self.path}: section {section!r}: {e} (write a literal dollar as $$)") from None
        return text.strip() if self.strip else text

    def messages(self, user_section: str, *, system_section: str | None = "system", **variables: Any) -> list[dict]:
        msgs = []
        if system_section is not None:
            msgs.append({"role": "system", "content": self.render(system_section, **variables)})
        msgs.append({"role": "user", "content": self.render(user_section, **variables)})
        return msgs


def parse_prompt(text: str, path: Path) -> Prompt:
    if not text.startswith("---\n"):
        raise PromptError(f"{path}: a prompt file starts with a '---' header (name, version)")
    try:
        header, body = text[4:].split("\n---\n", 1)
    except ValueError:
        raise PromptError(f"{path}: the '---' header is not closed") from None
    meta = {}
    for line in header.splitlines():
        if line.strip():
            k, _, v = line.partition(":")
            meta[k.strip()] = v.strip()
    if "name" not in meta or not meta.get("version", "").isdigit():
        raise PromptError(f"{path}: the header needs `name:` and an integer `version:`")
    if meta.get("strip", "false") not in ("true", "false"):
        raise PromptError(f"{path}: `strip:` is `true` or `false`, got {meta['strip']!r}")
    parts = _SECTION.split(body)
    sections = {parts[i]: parts[i + 1].strip("\n") + "\n" for i in range(1, len(parts), 2)}
    if not sections:
        raise PromptError(f"{path}: no '## <section>' found")
    return Prompt(
        name=meta["name"], version=int(meta["version"]), sections=sections, path=path, strip=meta.get("strip") == "true"
    )


@cache
def load_prompt(name: str) -> Prompt:
    """`name` is the path under data_synth/prompts without `.md`, e.g. `env/decompose`."""
    path = PROMPT_DIR / f"{name}.md"
    if not path.is_file():
        raise PromptError(f"no prompt file {path}")
    return parse_prompt(path.read_text(encoding="utf-8"), path)
