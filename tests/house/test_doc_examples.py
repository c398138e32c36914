"""What a user copies from toolrun's own texts matches the command: the recipe options table
lists every option of ``toolrun recipe`` (the Python examples: test_repository_docs.py)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_recipe_option_is_in_the_recipes_options_table() -> None:
    from toolrun.cli.recipe import recipe_command

    table = (ROOT / "docs" / "recipes.md").read_text(encoding="utf-8").split("## All options", 1)[1]
    documented = set(re.findall(r"^\| `(--[a-z-]+)", table, flags=re.MULTILINE))
    options = {name for param in recipe_command.params for name in param.opts + param.secondary_opts
               if name.startswith("--")}
    assert options - {"--help"} <= documented | {"--stream", "--no-stream"}
    assert "`--stream` / `--no-stream`" in table
