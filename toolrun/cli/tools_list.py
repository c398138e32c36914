"""``toolrun tools list``: what the catalog holds, as a table or as JSON."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click

from toolrun.cli.common import (
    catalog_usage_error_document,
    exit_with_load_failure_json,
    json_usage_errors,
    load_catalog_for_cli,
    print_load_problems,
    tools_dir_option,
)
from toolrun.core.errors import EXIT_BAD_INPUT, LoadError
from toolrun.core.text import json_printable
from toolrun.core.tool import Tool

_SENTENCE_END = re.compile(r"(?<=[.!?])\s|(?<=[。！？])")
_SUMMARY_WIDTH = 80


@click.command("list", cls=json_usage_errors(catalog_usage_error_document, indent=2))
@tools_dir_option
@click.option("--json", "as_json", is_flag=True,
              help='Print a JSON list of the tools on stdout; {"tools": 0, "problems": [...], "findings": [...]} '
                   "when the files do not load.")
@click.option("--refresh", is_flag=True, help="Ask each MCP server for its tools again instead of using the cached list.")
@click.pass_context
def list_command(ctx: click.Context, tools_dir: Path | None, as_json: bool, refresh: bool) -> None:
    """List the tools: name, backend, first sentence of the description, file.

    A file that does not load is shown as an error after the tools that did (exit 2).
    """
    try:
        catalog = load_catalog_for_cli(tools_dir, partial=not as_json, refresh_servers=refresh)
    except LoadError as error:
        if not as_json:
            raise
        exit_with_load_failure_json(ctx, error)
    if as_json:
        click.echo(json_printable([tool_listing(tool) for tool in catalog]))
        return
    if not len(catalog):
        click.echo(f"no tools in {catalog.directory}", err=True)
    else:
        rows = [(tool.name, tool.backend.kind, first_sentence(tool.description), _where(tool)) for tool in catalog]
        click.echo(format_table(("NAME", "BACKEND", "DESCRIPTION", "FILE"), rows))
    if catalog.problems:
        print_load_problems(catalog)
        ctx.exit(EXIT_BAD_INPUT)


def tool_listing(tool: Tool) -> dict[str, Any]:
    """One tool as an object of ``toolrun tools list --json``."""
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "backend": tool.backend.kind,
        "file": str(tool.source.file),
        "line": tool.source.line,
        "sequential": tool.sequential,
        "timeout": tool.timeout,
        "max_output": tool.max_output,
        "confirm": tool.confirm,
        "annotations": asdict(tool.annotations) if tool.annotations else None,
    }


def first_sentence(text: str, width: int = _SUMMARY_WIDTH) -> str:
    """The description's first sentence on one line, cut to ``width`` characters."""
    flat = " ".join(text.split())
    sentence = _SENTENCE_END.split(flat, maxsplit=1)[0].strip()
    return sentence if len(sentence) <= width else sentence[: width - 1].rstrip() + "…"


def format_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    """Left-aligned columns separated by two spaces; the last column is not padded."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    lines = []
    for row in [header, *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def _where(tool: Tool) -> str:
    # Relative to the current folder when it is inside it: shorter, and what the user typed.
    try:
        shown = os.path.relpath(tool.source.file)
    except ValueError:
        shown = str(tool.source.file)
    if shown.startswith(".."):
        shown = str(tool.source.file)
    return f"{shown}:{tool.source.line}"
