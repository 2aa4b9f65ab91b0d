"""Template: the reference exchange rate between two of a world's currencies."""

_USD_PER_UNIT: dict = {"USD": 1, "EUR": 1.08}


def exchange_rate(base: str, quote: str) -> dict:
    """How many units of `quote` one unit of `base` buys at the reference rates (6 decimals)."""
    codes = []
    for role, code in (("base", base), ("quote", quote)):
        if not isinstance(code, str) or code.strip().upper() not in _USD_PER_UNIT:
            raise ValueError(f"'{role}' must be one of {', '.join(sorted(_USD_PER_UNIT))}; got {code!r}")
        codes.append(code.strip().upper())
    src, dst = codes
    return {"base": src, "quote": dst, "rate": round(_USD_PER_UNIT[src] / _USD_PER_UNIT[dst], 6)}
