"""Pure tool: percentage change (the same in every environment)."""


def calculate_percentage_change(old_value: float, new_value: float) -> dict:
    """Percentage change from old_value to new_value, rounded to 2 decimals."""
    for role, v in (("old_value", old_value), ("new_value", new_value)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise ValueError(f"'{role}' must be a number; got {v!r}")
    if old_value == 0:
        raise ValueError("'old_value' must not be zero")
    change = (new_value - old_value) / old_value * 100
    return {"old_value": old_value, "new_value": new_value, "percent_change": round(change, 2)}
