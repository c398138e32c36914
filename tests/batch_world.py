"""A small world for ``toolrun batch`` tests: a recipe over ``city`` and ``tag``, the flower tool
(it can sleep), a scripted model, and rows as JSON Lines."""

from __future__ import annotations

import json
from pathlib import Path

from tests.flower_shop import STOCK_BACKED_TOOL_YAML

CITIES = ["北京", "上海", "深圳"]

STOCK_PY = """\
import time

STOCK = {{"北京": "玫瑰: 100", "上海": "百合: 80", "深圳": "向日葵: 200"}}


def get_flower_inventory(city):
    time.sleep({delay})
    return STOCK[city]
"""

RECIPE_YAML = """\
name: shop
model: openai:gpt-4o-mini
tools: [get_flower_inventory]
tools_dir: tools.d
messages:
  - user: "{{{{ city }}}}的花店有什么花? ({{{{ tag }}}})"
vars: {{city: 北京, tag: none}}
settings: {{max_turns: 4, stream: false}}
expect:
  tools_called: [get_flower_inventory]
  final_contains: [{must_contain}]
"""

SCRIPT_YAML = """\
- tool_calls: [{name: get_flower_inventory, arguments: {city: 北京}}]
- text: 北京有玫瑰
"""


def make_world(folder: Path, *, delay: float = 0.0, must_contain: str = "玫瑰") -> Path:
    """The recipe, tools and a scripted model (``script.yaml``) in ``folder``; returns the recipe's path."""
    tools = folder / "tools.d"
    tools.mkdir(parents=True, exist_ok=True)
    (tools / "flowers.yaml").write_text(STOCK_BACKED_TOOL_YAML, encoding="utf-8")
    (tools / "stock.py").write_text(STOCK_PY.format(delay=delay), encoding="utf-8")
    (folder / "script.yaml").write_text(SCRIPT_YAML, encoding="utf-8")
    recipe = folder / "shop.yaml"
    recipe.write_text(RECIPE_YAML.format(must_contain=must_contain), encoding="utf-8")
    return recipe


def write_rows(path: Path, count: int) -> list[dict[str, str]]:
    """``count`` distinct rows as JSON Lines; returns them."""
    rows = [{"city": CITIES[index % 3], "tag": f"row{index}"} for index in range(count)]
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return rows


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
