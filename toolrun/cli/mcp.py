"""``toolrun mcp``: serve the catalog to MCP clients (stdio, or streamable HTTP with --http)."""

from __future__ import annotations

from pathlib import Path

import click

from toolrun.api import DEFAULT_TOOLS_DIR
from toolrun.cli.common import tools_dir_option


def _report(line: str) -> None:
    click.echo(line, err=True)  # stdout is the protocol's channel on stdio


@click.command("mcp")
@tools_dir_option
@click.option("--tools", "tool_globs", multiple=True, metavar="GLOB", help="Serve only the tools matching GLOB. Repeatable.")
@click.option("--http", "http", metavar="HOST:PORT", help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")
@click.option("--auth", "auth", type=click.Path(path_type=Path, dir_okay=False),
              help="YAML file of clients, their bearer tokens and tools (required off loopback).")
@click.option("--audit", "audit", type=click.Path(path_type=Path, dir_okay=False),
              help="Append one JSON line per call here (HTTP default: stderr).")
@click.option("--yes", "assume_yes", is_flag=True, help="Approve every call of tools that ask for confirmation.")
def mcp_command(tools_dir: Path | None, tool_globs: tuple[str, ...], http: str | None, auth: Path | None,
                audit: Path | None, assume_yes: bool) -> None:
    """Serve the tool catalog over the Model Context Protocol.

    Tool files added, changed or removed while the server runs are picked up without a restart.
    """
    from toolrun.mcp import serve  # the SDK loads only for this command

    serve(tools_dir if tools_dir is not None else DEFAULT_TOOLS_DIR, tools=list(tool_globs) or None, http=http,
          auth=auth, audit=audit, assume_yes=assume_yes, report=_report)
