"""Pure tool: population density (the same in every environment)."""


def calculate_population_density(population: int, area_km2: float) -> dict:
    """Inhabitants per km², rounded to 2 decimals."""
    if isinstance(population, bool) or not isinstance(population, int) or population < 0:
        raise ValueError(f"'population' must be a non-negative integer; got {population!r}")
    if isinstance(area_km2, bool) or not isinstance(area_km2, (int, float)) or area_km2 <= 0:
        raise ValueError(f"'area_km2' must be a positive number; got {area_km2!r}")
    return {"population": population, "area_km2": area_km2, "density_per_km2": round(population / area_km2, 2)}
