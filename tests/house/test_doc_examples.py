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


def _shell_commands(text: str) -> list[str]:
    """The ``toolrun ...`` command lines of a text's sh code blocks (continuations joined)."""
    commands: list[str] = []
    for block in re.findall(r"^```(?:sh|bash|console)\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip().lstrip("$ ")
            words = line.split()
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):  # VAR=value toolrun ...
                words.pop(0)
            if words[:1] == ["toolrun"]:
                commands.append(" ".join(words))
    return commands


def test_every_option_of_a_documented_command_is_an_option_of_that_command() -> None:
    import click

    from toolrun.cli.group import main

    context = click.Context(main)
    unknown: list[str] = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for command in _shell_commands(page.read_text(encoding="utf-8")):
            words = command.split()[1:]
            group: click.Command = main
            options = {name for param in main.params for name in param.opts}  # --debug, --color before the command
            while isinstance(group, click.Group) and words and group.get_command(context, words[0]) is not None:
                group = group.get_command(context, words.pop(0))  # type: ignore[assignment]
            options |= {name for param in group.params for name in param.opts + param.secondary_opts}
            for word in words:
                option = word.split("=", 1)[0]
                if option.startswith("--") and option not in options:
                    unknown.append(f"{page.name}: {command}: {option}")
    assert unknown == []
