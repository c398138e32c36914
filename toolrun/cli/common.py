"""What several commands share: the --tools-dir option, loading the catalog for a command, and its JSON when that fails."""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from toolrun.catalog.gate import ToolPicker, load_checked_catalog
from toolrun.catalog.loader import load_catalog as load_catalog_quietly
from toolrun.catalog.model import DEFAULT_TOOLS_DIR, Catalog
from toolrun.cli.error_report import report_error
from toolrun.cli.load_report import load_report, load_summary
from toolrun.core.errors import EXIT_BAD_INPUT, LoadError, Problem
from toolrun.core.text import json_printable, terminal_safe

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem


def tools_dir_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--tools-dir D`` (default ./tools.d), passed to the command as ``tools_dir: Path | None``."""
    return click.option(
        "--tools-dir",
        "tools_dir",
        type=click.Path(path_type=Path, file_okay=True, dir_okay=True),
        default=None,
        help="Folder of tool files (*.yaml, *.yml). Default: ./tools.d",
    )(function)


def complete_tool_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Shell completion of a tool NAME: the catalog of --tools-dir (or ./tools.d), loaded quietly.

    Completion must never print or fail: a broken or missing directory completes nothing.
    """
    from click.shell_completion import CompletionItem

    from toolrun.cli.tools_list import first_sentence  # the same summary as `tools list`

    directory = ctx.params.get("tools_dir") or DEFAULT_TOOLS_DIR
    try:  # an MCP server whose file lists its tools is not started for a Tab: their names suffice
        catalog = load_catalog_quietly(Path(directory), wanted=lambda name: False).catalog
    except Exception:
        return []
    helps = {name: first_sentence(tool.description) for name, tool in catalog.tools.items()}
    helps.update({name: "a tool of an MCP server" for name in catalog.unstarted})
    return [CompletionItem(name, help=helps[name]) for name in sorted(helps) if name.startswith(incomplete)]


def print_load_summary(catalog: Catalog) -> None:
    """The one-line lint summary on stderr, then the problems of files left out and what loading noticed."""
    for line in load_report(catalog):
        click.echo(line, err=True)


def _print_summary_and_notices(catalog: Catalog) -> None:
    click.echo(load_summary(catalog), err=True)
    for notice in catalog.notices:
        click.echo(terminal_safe(f"toolrun: {notice}"), err=True)


def print_load_problems(catalog: Catalog) -> None:
    """Each problem of a file left out of a partial catalog as an error on stderr, and their count."""
    report_error(LoadError(catalog.problems))


def load_catalog_for_cli(tools_dir: Path | None, *, names: Collection[str] | None = None,
                         lint_together: ToolPicker | None = None, partial: bool = False,
                         refresh_servers: bool = False) -> Catalog:
    """Load the catalog a command works on and print the one-line lint summary to stderr.

    The per-tool lint runs on the tools loaded; the side-by-side rules only on the tools
    ``lint_together`` picks (a command that hands tools to a model). With ``names`` only the
    files that mention them are loaded; when one is not found there, the whole catalog is
    loaded (to say which names are close). Raises ``LoadError`` with every load problem of
    every file loaded, or with the lint's errors (lint errors stop loading; warnings do not),
    except for files that hold none of ``names``, or with ``partial`` (``catalog.problems``).
    """
    directory = tools_dir if tools_dir is not None else DEFAULT_TOOLS_DIR
    if names is not None:
        def summary_when_found(catalog: Catalog) -> None:
            if all(name in catalog for name in names):
                print_load_summary(catalog)

        catalog = load_checked_catalog(directory, names=names, lint_together=None, on_loaded=summary_when_found)
        if all(name in catalog for name in names):
            return catalog
    if partial:  # the caller reports the problems itself
        return load_checked_catalog(directory, on_loaded=_print_summary_and_notices,
                                    lint_together=lint_together, partial=True, refresh_servers=refresh_servers)
    return load_checked_catalog(directory, on_loaded=print_load_summary, lint_together=lint_together,
                                refresh_servers=refresh_servers)


def exit_with_load_failure_json(ctx: click.Context, error: LoadError) -> NoReturn:
    """``--json`` whatever happens: print ``{"tools": 0, "problems": [...], "findings": [...]}`` and exit 2.

    ``findings`` are the lint's when lint errors stopped loading, else empty. The problems
    go to stderr too, as without ``--json``.
    """
    findings = getattr(error.catalog, "findings", None) or []
    document = {"tools": 0, "problems": [problem.to_json() for problem in error.problems],
                "findings": [finding.to_json() for finding in findings]}
    click.echo(json_printable(document))
    report_error(error)
    ctx.exit(EXIT_BAD_INPUT)


def json_usage_errors(document: Callable[[Problem], Any], *, indent: int | None = None) -> type[click.Command]:
    """A command class for a command whose ``--json`` promises one JSON document on stdout whatever
    happens: a mistake click finds in its command line (an unknown option, a missing argument) is
    printed as ``document(problem)`` too, with the usual message on stderr and exit 2."""

    class JsonUsageErrors(click.Command):
        def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
            asked_for_json = "--json" in args  # click consumes the list as it parses
            try:
                return super().parse_args(ctx, args)
            except click.UsageError as error:
                if not asked_for_json:
                    raise
                command = " ".join(["toolrun", *ctx.command_path.split()[1:]])  # not the test runner's name
                problem = Problem(None, None, error.format_message(), f"see {command} --help")
                click.echo(json_printable(document(problem), indent=indent))
                error.show()
                ctx.exit(error.exit_code)

    return JsonUsageErrors


def catalog_usage_error_document(problem: Problem) -> dict[str, Any]:
    """What ``tools list/lint --json`` print for a mistake in their command line: no tools, the problem."""
    return {"tools": 0, "problems": [problem.to_json()], "findings": []}
