"""What several commands share: the --tools-dir option, loading the catalog for a command, and its JSON when that fails."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from toolrun.api import DEFAULT_TOOLS_DIR
from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.model import Catalog
from toolrun.cli.display import load_summary
from toolrun.errors import EXIT_BAD_INPUT, LoadError


def tools_dir_option(function: Callable[..., Any]) -> Callable[..., Any]:
    """``--tools-dir D`` (default ./tools.d), passed to the command as ``tools_dir: Path | None``."""
    return click.option(
        "--tools-dir",
        "tools_dir",
        type=click.Path(path_type=Path, file_okay=True, dir_okay=True),
        default=None,
        help="Folder of tool files (*.yaml, *.yml). Default: ./tools.d",
    )(function)


def print_load_summary(catalog: Catalog) -> None:
    """The one-line lint summary on stderr."""
    click.echo(load_summary(catalog), err=True)


def load_catalog_for_cli(tools_dir: Path | None) -> Catalog:
    """Load and lint the catalog a command works on, print the one-line summary to stderr.

    Raises ``LoadError`` with every load problem of every file, or with the lint's errors
    (lint errors stop loading; warnings do not).
    """
    directory = tools_dir if tools_dir is not None else DEFAULT_TOOLS_DIR
    return load_checked_catalog(directory, on_loaded=print_load_summary)


def exit_with_load_failure_json(ctx: click.Context, error: LoadError) -> NoReturn:
    """``--json`` whatever happens: print ``{"tools": 0, "problems": [...], "findings": [...]}`` and exit 2.

    ``findings`` are the lint's when lint errors stopped loading, else empty. The problems
    go to stderr too, as without ``--json``.
    """
    from toolrun.cli import report_error

    findings = getattr(error.catalog, "findings", None) or []
    document = {"tools": 0, "problems": [problem.to_json() for problem in error.problems],
                "findings": [finding.to_json() for finding in findings]}
    click.echo(json.dumps(document, ensure_ascii=False, indent=2))
    report_error(error)
    ctx.exit(EXIT_BAD_INPUT)
