"""Pure tool: unit conversion (the same in every environment). The procedural generator reads
its exact answers from the factors below, so the tool and the answers cannot drift apart."""

from env_registry.families.tool_templates._numbers import _number

LENGTH_M = {"m": 1.0, "km": 1000.0, "ft": 0.3048, "mi": 1609.344}
MASS_KG = {"kg": 1.0, "g": 0.001, "lb": 0.45359237}
TEMPERATURE = ("celsius", "fahrenheit")


def convert_units(value: float, from_unit: str, to_unit: str) -> dict:
    """Convert a length, mass or temperature between units; rounded to 2 decimals."""
    _number(value, "value")
    for table in (LENGTH_M, MASS_KG):
        if from_unit in table and to_unit in table:
            result = value * table[from_unit] / table[to_unit]
            break
    else:
        if from_unit in TEMPERATURE and to_unit in TEMPERATURE:
            if from_unit == to_unit:
                result = value
            elif from_unit == "celsius":
                result = value * 9 / 5 + 32
            else:
                result = (value - 32) * 5 / 9
        else:
            known = ", ".join([*LENGTH_M, *MASS_KG, *TEMPERATURE])
            raise ValueError(f"cannot convert {from_unit!r} to {to_unit!r}: units must be of one kind ({known})")
    return {"value": value, "from_unit": from_unit, "to_unit": to_unit, "result": round(result, 2)}
