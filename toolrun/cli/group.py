"""The command line's click groups: parse options, call the library, print.

Each command is in its own module, imported only when that command runs; this module
builds the groups and turns toolrun's errors into one clear message and the contract's
exit code, never a traceback. ``toolrun.cli.main`` is the entry point in front of it.

A new command: a module with a ``@click.command`` function, and one line in ``COMMANDS``
(or ``TOOLS_COMMANDS``) of ``toolrun.cli.command_table`` naming it.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

import click

from toolrun import __version__
from toolrun.cli.color import COLOR_CHOICES, remember_choice
from toolrun.cli.command_table import COMMANDS, IMPORT_COMMANDS, TOOLS_COMMANDS
from toolrun.cli.error_report import report_error, report_internal_error
from toolrun.core.errors import TOOL_LOGGER, ToolrunError


class ToolrunGroup(click.Group):
    """A group that reports ``ToolrunError`` as a message and an exit code, and imports a
    command's module only when the command is asked for (``lazy``: name -> "module:attr")."""

    def __init__(self, *args: Any, lazy: dict[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in self.lazy:
            module_name, _, attribute = self.lazy[cmd_name].partition(":")
            command = getattr(importlib.import_module(module_name), attribute)
            self.add_command(command, cmd_name)
        return command

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ToolrunError as exc:
            report_error(exc)
            ctx.exit(exc.exit_code)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, BrokenPipeError):
            raise  # click's own: its messages and exit codes, and a reader that closed the pipe (| head)
        except Exception as exc:  # noqa: BLE001 - a bug in toolrun: one line that says so, the traceback on --debug
            if ctx.find_root().params.get("debug") or os.environ.get("TOOLRUN_DEBUG"):
                raise
            report_internal_error(exc)
            ctx.exit(1)


@click.group(cls=ToolrunGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="toolrun")
@click.option("--debug", is_flag=True, envvar="TOOLRUN_DEBUG",
              help="Print the traceback of a failing tool on stderr (the model still gets one line). "
                   "Also TOOLRUN_DEBUG=1.")
@click.option("--color", "color", type=click.Choice(COLOR_CHOICES), default="auto", show_default=True,
              help="Colour errors, warnings, calls and results: auto (on a terminal, unless NO_COLOR is set; "
                   "FORCE_COLOR colours a pipe too), always or never.")
@click.pass_context
def main(ctx: click.Context, debug: bool, color: str) -> None:
    """toolrun: give a model your HTTP APIs and scripts, configured in YAML."""
    ctx.call_on_close(remember_choice(color))
    if debug:
        show_tool_tracebacks(ctx)


class _EchoToStderr(logging.Handler):
    # click.echo finds the current stderr at each record (a test runner swaps it per command).
    def emit(self, record: logging.LogRecord) -> None:
        click.echo(self.format(record), err=True)


def show_tool_tracebacks(ctx: click.Context) -> None:
    """Print the ``toolrun.tools`` logger (tool failures with their tracebacks) on stderr until ``ctx`` closes."""
    logger = logging.getLogger(TOOL_LOGGER)
    handler = _EchoToStderr()
    handler.setFormatter(logging.Formatter("debug: %(message)s"))
    previous_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)

    def restore() -> None:
        logger.removeHandler(handler)
        logger.setLevel(previous_level)

    ctx.call_on_close(restore)


@main.group(cls=ToolrunGroup, lazy=TOOLS_COMMANDS)
def tools() -> None:
    """List, show, lint and export the tool catalog."""


@main.group("import", cls=ToolrunGroup, lazy=IMPORT_COMMANDS)
def import_group() -> None:
    """Turn an API description into a toolset file."""
