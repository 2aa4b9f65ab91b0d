"""Pure tool: one number as a percentage of another (the same in every environment)."""

from env_registry.families.tool_templates._numbers import _number


def calculate_percentage(part: float, whole: float) -> dict:
    """`part` as a percentage of `whole`, rounded to 2 decimals."""
    share, total = _number(part, "part"), _number(whole, "whole")
    if total == 0:
        raise ValueError("'whole' must not be zero")
    return {"part": share, "whole": total, "percentage": round(share / total * 100, 2)}
