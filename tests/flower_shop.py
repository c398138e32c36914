"""The flower-stock tool the recipe and runner tests share: ``get_flower_inventory`` of three
cities, as a python backend (``flowers.py``) and as one item of a ``tools:`` list."""

from __future__ import annotations

STOCK = {"北京": "玫瑰: 100", "上海": "玫瑰: 80", "深圳": "玫瑰: 60"}

INVENTORY_PY = f"STOCK = {STOCK!r}\n\ndef get_flower_inventory(city):\n    return STOCK[city]\n"

# one list item at column 0: "tools:\n" + INVENTORY_TOOL_ITEM is a whole tools file
INVENTORY_TOOL_ITEM = """\
- name: get_flower_inventory
  description: >-
    Returns the current flower stock of one city. Use it when asked about stock;
    do not use it for prices.
  parameters:
    type: object
    properties:
      city: {type: string, enum: [北京, 上海, 深圳], description: City name}
    required: [city]
  backend: {python: "flowers.py:get_flower_inventory"}
"""

# A whole tools file whose backend is ``stock.py:get_flower_inventory`` beside it (each test
# world writes its own stock.py: with a delay, a barrier, other numbers).
STOCK_BACKED_TOOL_YAML = """\
name: get_flower_inventory
description: >-
  Returns the current flower stock of one of our shops, as "flower: count" pairs. Use it
  whenever someone asks what flowers a city's shop has; call it once per city. Do not use
  it for prices or orders.
parameters:
  type: object
  properties:
    city: {type: string, enum: [北京, 上海, 深圳], description: City of the shop}
  required: [city]
annotations: {read_only: true, destructive: false, idempotent: true}
backend:
  python: stock.py:get_flower_inventory
"""
