"""What several commands share: the --tools-dir option and loading the catalog for a command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from toolrun.api import DEFAULT_TOOLS_DIR
from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.model import Catalog
from toolrun.cli.display import load_summary


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
