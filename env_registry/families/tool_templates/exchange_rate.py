"""Template: the reference exchange rate between two of a world's currencies."""

from env_registry.families.tool_templates._currencies import _USD_PER_UNIT, _code


def exchange_rate(base: str, quote: str) -> dict:
    """How many units of `quote` one unit of `base` buys at the reference rates (6 decimals)."""
    src, dst = _code(base, "base"), _code(quote, "quote")
    return {"base": src, "quote": dst, "rate": round(_USD_PER_UNIT[src] / _USD_PER_UNIT[dst], 6)}
