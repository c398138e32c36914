"""``toolrun tools select TEXT``: the ranking a request with that text would get under ``tool_selection``."""

from __future__ import annotations

from pathlib import Path

import click

from toolrun.catalog.model import DEFAULT_TOOLS_DIR
from toolrun.catalog.ranking_cache import load_ranking_index
from toolrun.cli.common import (
    catalog_usage_error_document,
    exit_with_load_failure_json,
    json_usage_errors,
    print_load_summary,
    tools_dir_option,
)
from toolrun.cli.load_report import counts_summary
from toolrun.cli.text_param import TYPED_TEXT
from toolrun.cli.tools_list import format_table
from toolrun.core.errors import LoadError
from toolrun.core.text import json_printable
from toolrun.loop.tool_offer import DEFAULT_MAX_TOOLS


@click.command("select", cls=json_usage_errors(catalog_usage_error_document, indent=2))
@click.argument("text", type=TYPED_TEXT)
@tools_dir_option
@click.option("-k", "limit", type=click.IntRange(min=1), default=DEFAULT_MAX_TOOLS, show_default=True,
              help="How many tools to show (a recipe's settings.tool_selection.max_tools).")
@click.option("--json", "as_json", is_flag=True, help='Print {"tools": [{"name", "score"}, ...]} on stdout.')
@click.pass_context
def select_command(ctx: click.Context, text: str, tools_dir: Path | None, limit: int, as_json: bool) -> None:
    """Rank the tools for TEXT as settings.tool_selection would: best first, with scores.

    Tools with score 0 share no word with TEXT: a request offers them in the places the
    ranked tools leave, in catalog order, and so are they shown.
    """
    directory = tools_dir if tools_dir is not None else DEFAULT_TOOLS_DIR

    def print_kept_summary(tools: int, warnings: int) -> None:
        click.echo(counts_summary(directory, tools, 0, warnings), err=True)

    try:
        index = load_ranking_index(directory, on_loaded=print_load_summary, on_kept=print_kept_summary)
    except LoadError as error:
        if not as_json:
            raise
        exit_with_load_failure_json(ctx, error)
    offered = index.rank(text, limit)  # as a request fills its places: the ranked tools, then catalog order
    if as_json:
        click.echo(json_printable({"tools": [{"name": tool.name, "score": tool.score} for tool in offered]}))
        return
    if offered:
        click.echo(format_table(("SCORE", "NAME"), [(f"{tool.score:.2f}", tool.name) for tool in offered]))
    unranked = sum(tool.score <= 0 for tool in offered)
    if unranked == len(offered) and offered:
        click.echo(f"no tool in {directory} shares a word with the text: a request offers these, the first "
                   "in catalog order", err=True)
    elif unranked:
        click.echo(f"the last {unranked} share no word with the text: they fill the places left, in catalog order",
                   err=True)
