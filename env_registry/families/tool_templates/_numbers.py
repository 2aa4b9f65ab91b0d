"""Prelude of the procedural tools that take numbers: a numeric argument, or a ValueError naming it."""


def _number(value: object, role: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"'{role}' must be a number; got {value!r}")
    return value
