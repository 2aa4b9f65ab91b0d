"""Template: the products a world's company makes."""

from env_registry.families.tool_templates._lookup import _find

_TITLE: str = "Example Product Catalog"
_MAKERS: dict = {"acme labs": "Acme Labs"}
_PRODUCTS: list = [{"product": "Acme Drill X2", "maker": "Acme Labs", "category": "drill", "price": 99.0}]


def catalog_search(maker: str) -> dict:
    """Every product of one manufacturer in the catalog, with its category and list price."""
    name = _MAKERS[_find(_MAKERS, maker, "maker", "manufacturer", _TITLE)]
    return {"maker": name, "products": [p for p in _PRODUCTS if p["maker"] == name]}
