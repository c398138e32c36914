"""``toolrun schema tool|recipe|gateway``: print a packaged JSON Schema (for editors and CI)."""

from __future__ import annotations

import click

from toolrun.catalog.tool_schema import packaged_schema_text
from toolrun.core.errors import Problem, UserError

SCHEMA_NAMES = ("tool", "recipe", "gateway")


@click.command("schema")
@click.argument("name", type=click.Choice(SCHEMA_NAMES))
def schema_command(name: str) -> None:
    """Print the JSON Schema of tool files (tool), recipes (recipe) or `toolrun mcp --config` files (gateway).

    Point your editor at it, e.g. a first line `# yaml-language-server: $schema=tool.schema.json`
    after `toolrun schema tool > tool.schema.json`.
    """
    text = packaged_schema_text(name)
    if text is None:
        where = f"toolrun/schemas/{name}.schema.json"
        message = f"the {name} schema is not packaged in this toolrun install"
        raise UserError(Problem(where, None, message, "reinstall toolrun"))
    click.echo(text.rstrip("\n"))
