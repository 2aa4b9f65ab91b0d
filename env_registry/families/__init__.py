"""Environment families: generators and adapters that emit `EnvSpec`s.

- `procedural`: seeded, LLM-free synthetic tool worlds (the embedded default).

What a family knows of its own tools that the variant makers cannot read from an environment
(`variant_makers.VariantHints`) is registered here by `Provenance.generator` (`variant_hints`): a
family that keeps such a table exports it beside its code (the procedural family's
`_variants.HINTS`) and adds one entry below; a family without one is read from its environments'
data alone. The entries are imported when asked: sandbox workers import some of this package's
modules (`tau_sandbox`) with the standard library only, so importing the package imports nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from env_registry.variant_makers import VariantHints


def variant_hints(generator: str) -> VariantHints:
    """The variant hints of the family `generator` (`Provenance.generator`); none where it keeps no table."""
    from env_registry.families import _variants, procedural
    from env_registry.variant_makers import VariantHints

    registered = {procedural.GENERATOR: _variants.HINTS}
    return registered.get(generator, VariantHints())
