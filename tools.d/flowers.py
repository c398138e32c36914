"""The flower-shop stock behind the ``get_flower_inventory`` tool (tools.d/flowers.yaml)."""

from __future__ import annotations

from toolrun import ToolError

STOCK: dict[str, dict[str, int]] = {
    "北京": {"玫瑰": 100, "郁金香": 150},
    "上海": {"百合": 80, "康乃馨": 120},
    "深圳": {"向日葵": 200, "玉兰": 90},
}


def get_flower_inventory(city: str) -> str:
    """The stock of one city's shop as "flower: count, ..." (北京 -> "玫瑰: 100, 郁金香: 150")."""
    stock = STOCK.get(city.strip())
    if stock is None:
        known = "、".join(STOCK)
        raise ToolError(f"no shop in {city!r}; we have shops only in {known} — ask about one of those")
    return ", ".join(f"{flower}: {count}" for flower, count in stock.items())
