"""Prelude of the currency tools: a world's reference rates (filled per tool) and a currency code
argument, or a ValueError listing the known ones."""

_USD_PER_UNIT: dict = {"USD": 1, "EUR": 1.08}


def _code(value: object, role: str) -> str:
    if not isinstance(value, str) or value.strip().upper() not in _USD_PER_UNIT:
        raise ValueError(f"'{role}' must be one of {', '.join(sorted(_USD_PER_UNIT))}; got {value!r}")
    return value.strip().upper()
