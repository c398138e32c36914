"""The names of ``toolrun``'s commands and the modules that define them, without click.

The start-up reads these before click is imported (which module to import with the collector
off, and which command's compiled dataclass code to load); ``toolrun.cli.group`` builds the
click groups from the same tables.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator

# command name -> "module:function"; imported on first use
COMMANDS = {
    "recipe": "toolrun.cli.recipe:recipe_command",
    "call": "toolrun.cli.call:call_command",
    "schema": "toolrun.cli.schema:schema_command",
    "mcp": "toolrun.cli.mcp:mcp_command",
    "logs": "toolrun.cli.logs:logs_group",
    "ask": "toolrun.cli.ask:ask_command",
    "view": "toolrun.cli.view:view_command",
    "chat": "toolrun.cli.chat:chat_command",
    "batch": "toolrun.cli.batch:batch_command",
}
TOOLS_COMMANDS = {
    "list": "toolrun.cli.tools_list:list_command",
    "show": "toolrun.cli.tools_export:show_command",
    "lint": "toolrun.cli.tools_lint:lint_command",
    "export": "toolrun.cli.tools_export:export_command",
    "select": "toolrun.cli.tools_select:select_command",
}
IMPORT_COMMANDS = {
    "openapi": "toolrun.cli.import_openapi:openapi_command",
}
COMMAND_GROUPS = {"tools": TOOLS_COMMANDS, "import": IMPORT_COMMANDS}  # toolrun's groups of commands


def command_words(args: list[str]) -> Iterator[str]:
    """The words of ``toolrun``'s arguments that are not options: the command's name comes first."""
    after_color = False
    for arg in args:
        if arg.startswith("-") or after_color:
            after_color = arg == "--color"  # the group's one option with a value; --debug, --help take none
            continue
        yield arg


def import_command_module(args: list[str]) -> None:
    """Import the module of the command ``args`` (``toolrun``'s arguments) name, if they name one.

    Only the start-up uses it (to import with the collector off); the group imports the same
    module again when it runs the command, and reports any failure to import it then.
    """
    lazy = COMMANDS
    for arg in command_words(args):
        if arg in COMMAND_GROUPS and lazy is COMMANDS:
            lazy = COMMAND_GROUPS[arg]
            continue
        target = lazy.get(arg)
        if target is not None:
            try:
                importlib.import_module(target.partition(":")[0])
            except Exception:  # noqa: BLE001 - the group's own import of it reports this
                pass
        return
