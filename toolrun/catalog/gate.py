"""Load a catalog and hold it to the lint: what every command and ``toolrun.load_catalog`` do.

Load problems always stop loading; lint findings of severity error (a poisoned or broken
description) stop it too, so no model is offered such a tool. Warnings do not stop it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from toolrun.catalog.lint import LintFinding, lint_catalog
from toolrun.catalog.loader import load_catalog
from toolrun.catalog.model import Catalog
from toolrun.errors import LoadError, Problem, UserError


def load_checked_catalog(directory: Path, *, lint: bool = True,
                         on_loaded: Callable[[Catalog], None] | None = None) -> Catalog:
    """The catalog of ``directory``, with ``findings`` when ``lint``.

    Raises ``LoadError`` listing every load problem of every file, or every lint error
    (then ``error.catalog`` is the catalog, findings included). ``on_loaded`` sees the
    catalog once it is linted, before lint errors are raised (to print a summary first).
    """
    try:
        result = load_catalog(Path(directory))
    except LoadError:
        raise
    except UserError as exc:  # a directory that is missing or unreadable: a load problem too
        raise LoadError(exc.problems) from None
    if result.problems:
        raise LoadError(result.problems)
    catalog = result.catalog
    if lint:
        catalog.findings = lint_catalog(catalog)
    if on_loaded is not None:
        on_loaded(catalog)
    if catalog.lint_errors:
        raise LoadError([lint_problem(finding) for finding in catalog.lint_errors], catalog=catalog)
    return catalog


def lint_problem(finding: LintFinding) -> Problem:
    """A lint finding as a problem to report (file, line, message and the rule's name)."""
    subject = f"{finding.tool}: " if finding.tool else ""
    return Problem(finding.file, finding.line, f"{subject}{finding.message} [{finding.rule}]")
