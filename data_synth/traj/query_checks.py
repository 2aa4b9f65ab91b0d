"""Rule checks of a generated user query (pure). docs/method.md §1.4: a query never names a tool and asks
for execution, not instructions. The LLM quality scores judge the rest.

- A tool name counts as named when it appears as a whole word (case-insensitive) and looks like
  an identifier (has `_`, `-`, a digit or an inner capital: `get_user_id`, `searchFlights`), or,
  for plain-word names (`cat`, `sort`, `find`, which are ordinary words), when it is written as
  code: in backticks or followed by `(`.
- A query asks for instructions when it opens like "how do/can/should I ...", "explain how",
  "what are the steps", "show me how", "give me instructions/steps", "write a script".
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MIN_CHARS = 12
MAX_CHARS = 2000

_INSTRUCTIONS = re.compile(
    r"^\W*(how\s+(do|can|could|should|would)\s+(i|we|you|one)\b|explain\s+how|what\s+are\s+the\s+steps|"
    r"show\s+me\s+how|give\s+me\s+(the\s+)?(instructions|steps)|write\s+(me\s+)?(a\s+)?(script|code|program))",
    re.IGNORECASE,
)


def _identifier_like(name: str) -> bool:
    return bool(re.search(r"[_\-0-9]", name) or re.search(r"[a-z][A-Z]", name))


def named_tools(query: str, tool_names: Iterable[str]) -> list[str]:
    found = []
    for name in tool_names:
        esc = re.escape(name)
        if _identifier_like(name):
            hit = re.search(rf"(?<![A-Za-z0-9_]){esc}(?![A-Za-z0-9_])", query, re.IGNORECASE)
        else:
            hit = re.search(rf"`{esc}`|(?<![A-Za-z0-9_]){esc}\s*\(", query, re.IGNORECASE)
        if hit:
            found.append(name)
    return found


def check_query(query: str, tool_names: Iterable[str]) -> str:
    """The stripped query, or ValueError saying what is wrong (shown to the model on repair)."""
    q = " ".join(query.split())
    if len(q) < MIN_CHARS:
        raise ValueError(f"the query is too short ({len(q)} characters)")
    if len(q) > MAX_CHARS:
        raise ValueError(f"the query is too long ({len(q)} characters, at most {MAX_CHARS})")
    named = named_tools(q, tool_names)
    if named:
        raise ValueError(f"the query names tools {named}; describe the need, never the tool")
    if _INSTRUCTIONS.search(q):
        raise ValueError("the query asks for instructions; it must ask for the task to be carried out")
    return q
