"""Pure tool: percentage change (the same in every environment)."""

from env_registry.families.tool_templates._numbers import _number


def calculate_percentage_change(old_value: float, new_value: float) -> dict:
    """Percentage change from old_value to new_value, rounded to 2 decimals."""
    old, new = _number(old_value, "old_value"), _number(new_value, "new_value")
    if old == 0:
        raise ValueError("'old_value' must not be zero")
    return {"old_value": old, "new_value": new, "percent_change": round((new - old) / old * 100, 2)}
