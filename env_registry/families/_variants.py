"""The procedural family's variants: the family-agnostic makers (`env_registry.variant_makers`)
with what this family knows of its own tools (`HINTS`, which `env_registry.families` registers
for `derive-variants`).

Each maker in `PROCEDURAL_MAKERS` returns the variant, or None where the environment cannot carry
it (then the generator draws another). `variants.VariantShares` says how many of each `generate` makes.
"""

from __future__ import annotations

from collections.abc import Callable

from env_registry.families._tools import PureKind
from env_registry.spec import EnvSpec, Variant
from env_registry.variant_makers import MAKERS as AGNOSTIC
from env_registry.variant_makers import CannotCarry, VariantHints

# What a first step's identifying parameter names, as the agent would ask for it.
_NOUNS = {"name": "person", "events": "event", "products": "product", "companies": "company", "cities": "city"}
# Tools without world data (unit conversion, arithmetic, dates): the same in every environment.
PURE_TOOLS = frozenset(kind.key for kind in PureKind.__subclasses__())
HINTS = VariantHints(nouns=_NOUNS, pure_tools=PURE_TOOLS)


def _or_none(variant: Variant) -> Callable[[EnvSpec], EnvSpec | None]:
    def maker(env: EnvSpec) -> EnvSpec | None:
        made = AGNOSTIC[variant](env, HINTS)
        return None if isinstance(made, CannotCarry) else made

    maker.__name__ = variant.value
    return maker


unanswerable = _or_none(Variant.UNANSWERABLE)
missing_value = _or_none(Variant.MISSING_VALUE)
missing_function = _or_none(Variant.MISSING_FUNCTION)
no_tool = _or_none(Variant.NO_TOOL)

PROCEDURAL_MAKERS: dict[Variant, Callable[[EnvSpec], EnvSpec | None]] = {
    Variant.ANSWERABLE: lambda env: env,
    Variant.UNANSWERABLE: unanswerable,
    Variant.MISSING_VALUE: missing_value,
    Variant.MISSING_FUNCTION: missing_function,
    Variant.NO_TOOL: no_tool,
}
