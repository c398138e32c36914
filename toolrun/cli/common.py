"""What several commands share: the --tools-dir option and loading the catalog for a command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from toolrun.catalog.lint import LintFinding, lint_catalog
from toolrun.catalog.loader import load_catalog
from toolrun.catalog.model import Catalog
from toolrun.errors import Problem, UserError

DEFAULT_TOOLS_DIR = Path("tools.d")


def tools_dir_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--tools-dir D`` (default ./tools.d), passed to the command as ``tools_dir: Path | None``."""
    return click.option(
        "--tools-dir",
        "tools_dir",
        type=click.Path(path_type=Path, file_okay=True, dir_okay=True),
        default=None,
        help="Folder of tool files (*.yaml, *.yml). Default: ./tools.d",
    )(function)


def load_catalog_for_cli(tools_dir: Path | None, *, stop_on_lint_errors: bool = True) -> Catalog:
    """Load the catalog a command works on, print a one-line lint summary to stderr, return it.

    Raises UserError with every load problem of every file; with ``stop_on_lint_errors``
    (lint errors stop loading) also with the lint findings of severity error.
    """
    directory = tools_dir if tools_dir is not None else DEFAULT_TOOLS_DIR
    result = load_catalog(directory)
    if result.problems:
        raise UserError(result.problems)
    findings = lint_catalog(result.catalog)
    errors = [f for f in findings if f.severity == "error"]
    warnings = [f for f in findings if f.severity == "warning"]
    click.echo(load_summary(len(result.catalog), directory, len(errors), len(warnings)), err=True)
    if errors and stop_on_lint_errors:
        raise UserError([_lint_problem(finding) for finding in errors])
    return result.catalog


def load_summary(tool_count: int, directory: Path, errors: int, warnings: int) -> str:
    """``toolrun: 7 tools from tools.d — 0 errors, 2 warnings (toolrun tools lint shows them)``."""
    noun = "tool" if tool_count == 1 else "tools"
    line = f"toolrun: {tool_count} {noun} from {directory} — {errors} errors, {warnings} warnings"
    if errors or warnings:
        line += " (toolrun tools lint shows them)"
    return line



def _lint_problem(finding: LintFinding) -> Problem:
    subject = f"{finding.tool}: " if finding.tool else ""
    return Problem(finding.file, finding.line, f"{subject}{finding.message} [{finding.rule}]")
