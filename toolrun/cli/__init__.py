"""The command line: parse options, call the library, print. Nothing else lives here.

Each command is in its own module; this one builds the groups and turns toolrun's errors
into one clear message and the contract's exit code, never a traceback.
"""

from __future__ import annotations

import sys

import click

from toolrun import __version__
from toolrun.errors import ToolrunError


class ToolrunGroup(click.Group):
    """A group that reports ``ToolrunError`` as a message and an exit code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except ToolrunError as exc:
            report_error(exc)
            ctx.exit(exc.exit_code)


def report_error(exc: ToolrunError) -> None:
    problems = getattr(exc, "problems", None)
    if problems:
        for problem in problems:
            click.echo(f"error: {problem}", err=True)
        if len(problems) > 1:
            click.echo(f"{len(problems)} problems.", err=True)
    else:
        click.echo(f"error: {exc}", err=True)


@click.group(cls=ToolrunGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="toolrun")
def main() -> None:
    """toolrun: give a model your HTTP APIs and scripts, configured in YAML."""


@main.group(cls=ToolrunGroup)
def tools() -> None:
    """List, show, lint and export the tool catalog."""


def _register() -> None:
    # Imported for their side effect: each module adds its commands to the groups above.
    from toolrun.cli import call, mcp, recipe, schema, tools_export, tools_lint, tools_list  # noqa: F401


_register()

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
