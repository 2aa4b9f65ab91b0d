"""Template: currency conversion at a world's reference rates."""

_USD_PER_UNIT: dict = {"USD": 1, "EUR": 1.08}


def convert_currency(amount: float, from_currency: str, to_currency: str) -> dict:
    """Convert an amount between currencies at reference rates (mid-market)."""
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        raise ValueError(f"'amount' must be a number; got {amount!r}")
    if amount < 0:
        raise ValueError("'amount' must not be negative")
    codes = []
    for role, code in (("from_currency", from_currency), ("to_currency", to_currency)):
        if not isinstance(code, str) or code.strip().upper() not in _USD_PER_UNIT:
            raise ValueError(f"'{role}' must be one of {', '.join(sorted(_USD_PER_UNIT))}; got {code!r}")
        codes.append(code.strip().upper())
    src, dst = codes
    rate = _USD_PER_UNIT[src] / _USD_PER_UNIT[dst]
    return {
        "amount": amount,
        "from_currency": src,
        "to_currency": dst,
        "rate": round(rate, 6),
        "converted_amount": round(amount * _USD_PER_UNIT[src] / _USD_PER_UNIT[dst], 2),
    }
