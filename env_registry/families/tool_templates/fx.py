"""Template: currency conversion at a world's reference rates."""

from env_registry.families.tool_templates._currencies import _USD_PER_UNIT, _code
from env_registry.families.tool_templates._numbers import _number


def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict:
    """Convert an amount between currencies at reference rates (mid-market)."""
    if _number(amount, "amount") < 0:
        raise ValueError("'amount' must not be negative")
    src, dst = _code(from_currency, "from_currency"), _code(to_currency, "to_currency")
    rate = _USD_PER_UNIT[src] / _USD_PER_UNIT[dst]
    return {
        "amount": amount,
        "from_currency": src,
        "to_currency": dst,
        "rate": round(rate, 6),
        "converted_amount": round(amount * _USD_PER_UNIT[src] / _USD_PER_UNIT[dst], 2),
    }
