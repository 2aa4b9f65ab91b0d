"""Pure tool: one number as a percentage of another (the same in every environment)."""


def calculate_percentage(part: float, whole: float) -> dict:
    """`part` as a percentage of `whole`, rounded to 2 decimals."""
    for role, v in (("part", part), ("whole", whole)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"'{role}' must be a number; got {v!r}")
    if whole == 0:
        raise ValueError("'whole' must not be zero")
    return {"part": part, "whole": whole, "percentage": round(part / whole * 100, 2)}
