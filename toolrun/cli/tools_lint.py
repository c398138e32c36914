"""``toolrun tools lint``: every description-quality finding, as text or as JSON."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.lint import LintFinding, count_by_severity
from toolrun.catalog.lint_selection import FindingFilter, summarised_info
from toolrun.catalog.model import DEFAULT_TOOLS_DIR
from toolrun.cli.color import color_enabled, paint
from toolrun.cli.common import (
    catalog_usage_error_document,
    exit_with_load_failure_json,
    json_usage_errors,
    tools_dir_option,
)
from toolrun.cli.error_report import report_error
from toolrun.core.errors import EXIT_BAD_INPUT, EXIT_RUN_FAILED, LoadError
from toolrun.core.text import counted, json_printable, terminal_safe


@click.command("lint", cls=json_usage_errors(catalog_usage_error_document, indent=2))
@tools_dir_option
@click.option("--json", "as_json", is_flag=True,
              help='Print {"tools": N, "problems": [...], "findings": [...]} on stdout, also when the files do not load.')
@click.option("--strict", is_flag=True, help="Fail (exit 1) on warnings too, not only on errors.")
@click.option("--rule", "rules", multiple=True, metavar="RULE", help="Only this rule's findings (repeatable).")
@click.option("--severity", type=click.Choice(["error", "warning", "info"]), default="info", show_default=True,
              help="Only findings at least this severe.")
@click.option("--tool", "tool_globs", multiple=True, metavar="GLOB", help="Only the findings of these tools (repeatable).")
@click.option("--verbose", is_flag=True, help="List every info finding of every tool, not one line per rule.")
@click.pass_context
def lint_command(ctx: click.Context, tools_dir: Path | None, as_json: bool, strict: bool, rules: tuple[str, ...],
                 severity: str, tool_globs: tuple[str, ...], verbose: bool) -> None:
    """Check that each tool tells a model enough to choose and call it (rules: docs/lint.md).

    Exit 0 when clean or only warnings/info, 1 on a lint error (or a warning with
    --strict) among the findings shown, 2 when a tool file does not load (the others are
    still checked).
    """
    selection = FindingFilter(rules, severity, tool_globs)
    if selection.unknown_rule():
        raise click.UsageError(str(selection.unknown_rule()))
    directory = tools_dir if tools_dir is not None else DEFAULT_TOOLS_DIR
    try:  # the per-tool findings of unchanged files come from the cache; a broken file is reported below
        catalog = load_checked_catalog(directory, partial=True)
    except LoadError as error:
        if error.catalog is not None:
            catalog = error.catalog  # lint errors are listed here, not a reason to stop
        elif not as_json:
            raise
        else:
            exit_with_load_failure_json(ctx, error)
    findings = selection.apply(catalog.findings)
    counts = count_by_severity(findings)
    problems = catalog.problems
    if as_json:
        document = {"tools": len(catalog), "problems": [problem.to_json() for problem in problems],
                    "findings": [finding.to_json() for finding in findings]}
        click.echo(json_printable(document))
    else:
        shown, info_lines = (findings, []) if verbose or rules else summarised_info(findings)
        color = color_enabled(sys.stdout)
        lines = _finding_lines(shown, info_lines, color)
        if lines:  # written at once: an echo per finding was a tenth of a warm lint of 1,213 tools
            click.echo("\n".join(lines), color=color)
        if len(catalog) or not problems:  # nothing loaded: the problems below say all there is
            click.echo(
                f"{counted(len(catalog), 'tool')}: {counted(counts['error'], 'error')}, "
                f"{counted(counts['warning'], 'warning')}, {counts['info']} info"
                + (f", {counts['ignored']} ignored" if counts["ignored"] else ""),
                err=True,
            )
    if problems:  # a file that does not load fails the lint like before, after what did load is checked
        report_error(LoadError(problems))
        ctx.exit(EXIT_BAD_INPUT)
    if counts["error"] or (strict and counts["warning"]):
        ctx.exit(EXIT_RUN_FAILED)


def _finding_lines(shown: list[LintFinding], info_lines: list[str], color: bool) -> list[str]:
    """Each finding's line, escaped first (a description's text is in some messages), then coloured."""
    lines: list[str] = []
    for finding in shown:
        where, severity = finding.where(), finding.severity
        rest = terminal_safe(str(finding)[len(where) + len(severity):])
        lines.append(terminal_safe(where) + paint(severity, severity, color) + rest)
    return lines + [paint(terminal_safe(line), "info", color) for line in info_lines]
