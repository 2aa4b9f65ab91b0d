"""How validation treats one family's environments (a table entry per `Provenance.generator`).

Most environments are validated the same way: every rule applies, and replay runs each tool's
golden calls and checks the output contains the expected answer. A family whose environments
are judged otherwise says so here, with the functions that do it:

- `replay_calls`: the calls to replay (twice, for determinism), in order, each with its
  expected answer or None where the family's own checker judges outputs (BFCL: its ground-truth
  call sequence, whose results BFCL's checker compares);
- `waives(rule, field)`: rules whose subject the family does not have (BFCL: no final answer,
  no sub-question trace);
- `sandbox`: `SandboxConfig` fields its tools need (packages they import, output sizes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from env_registry.spec import EnvSpec


@dataclass(frozen=True)
class ReplayCall:
    """One call of a replay: reported at `path` (a path into the spec, or into the family's own
    data), tool `env.tools[tool]`, its arguments, the answer its output must contain, and which
    golden call it is (tool index, call index; None for a call that is none)."""

    path: str
    tool: int
    args: dict[str, Any]
    expected: str | None = None
    golden_call: tuple[int, int] | None = None


def golden_replay(env: EnvSpec) -> list[ReplayCall]:
    """Every golden call of `env`, tool by tool as listed, each expecting its answer."""
    return [
        ReplayCall(f"tools[{i}].golden_calls[{j}]", i, g.args, g.expected, (i, j))
        for i, t in enumerate(env.tools)
        for j, g in enumerate(t.golden_calls)
    ]


def _no_waiver(rule: str, field: str) -> bool:
    return False


@dataclass(frozen=True)
class FamilyRules:
    replay_calls: Callable[[EnvSpec], list[ReplayCall]] = golden_replay
    waives: Callable[[str, str], bool] = _no_waiver
    sandbox: dict[str, Any] = field(default_factory=dict)


DEFAULT = FamilyRules()


# ASTRA-RL-1k rows imported under the plain rule (`--reward-rule plain`): the answers whose golden
# calls were not recovered have none, so the rules that need one are waived for them; the calls
# that were recovered are replayed (twice) as any golden call.
PLAIN_RL_GENERATOR = "astra_rl_plain"
_PLAIN_WAIVED = ("golden_present", "golden_covers_answer")

PLAIN_RL = FamilyRules(waives=lambda rule, field: rule in _PLAIN_WAIVED)
