"""The trajectory pipeline's prompts: versioned text files in `data_synth/prompts/traj/`.

A prompt file starts with `version: N`, then sections `--- system` and `--- user` (either may be
absent). Placeholders are `${name}` (`string.Template`, so JSON braces need no escaping); a
missing value is an error, never an empty string. The version goes into every record a prompt
produced, so a changed prompt is visible in the data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from string import Template
from typing import Any

_SECTION = re.compile(r"^--- (system|user)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Prompt:
    name: str
    version: int
    system: Template | None
    user: Template | None

    @property
    def tag(self) -> str:
        return f"{self.name}@v{self.version}"

    def messages(self, **values: Any) -> list[dict[str, str]]:
        out = []
        for role, tpl in (("system", self.system), ("user", self.user)):
            if tpl is None:
                continue
            try:
                out.append({"role": role, "content": tpl.substitute({k: str(v) for k, v in values.items()}).strip()})
            except KeyError as e:
                raise KeyError(f"prompt {self.tag}: no value for placeholder {e.args[0]!r}") from None
        return out


@cache
def load(name: str) -> Prompt:
    text = (files("data_synth") / "prompts" / "traj" / f"{name}.txt").read_text(encoding="utf-8")
    head, _, body = text.partition("\n")
    m = re.fullmatch(r"version:\s*(\d+)\s*", head)
    if not m:
        raise ValueError(f"prompt {name}: first line must be 'version: N', got {head!r}")
    parts = _SECTION.split(body)
    sections = {parts[i]: Template(parts[i + 1].strip("\n")) for i in range(1, len(parts) - 1, 2)}
    return Prompt(name, int(m.group(1)), sections.get("system"), sections.get("user"))
