"""Load a catalog and hold it to the lint: what every command and ``toolrun.load_catalog`` do.

A file with a load problem is a problem of that file only: a caller that names the tools it
needs (``names``, ``wanted``) gets the catalog of the healthy files when none of the tools it
may use is declared in a broken one (``catalog.problems`` says what was left out); a caller
that needs the whole catalog is stopped, unless it accepts a partial one (``partial``).
Lint findings of severity error (a poisoned or broken description) always stop loading, so
no model is offered such a tool. Warnings do not stop it.
The per-tool rules run on every tool loaded (kept in the catalog cache with the file);
the rules about tools side by side (near-duplicates, tool count, token cost) run on the
tools ``lint_together`` picks: all of them by default, the recipe's own for a recipe, none
for a command that offers no tool to a model (``tools list``, ``call``).
"""

from __future__ import annotations

import _thread
import contextlib
import gc
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path

from toolrun.catalog.cache import CatalogCache
from toolrun.catalog.lint import (
    LintFinding,
    apply_ignores,
    catalog_findings,
    lint_tool,
    look_alike_name_findings,
    near_duplicate_findings,
    sort_findings,
)
from toolrun.catalog.loader import LoadResult, load_catalog
from toolrun.catalog.model import Catalog
from toolrun.core.errors import LoadError, Problem, UserError
from toolrun.core.tool import Tool

ToolPicker = Callable[[Catalog], Iterable[Tool]]


def every_tool(catalog: Catalog) -> Iterable[Tool]:
    """All the catalog's tools: the whole catalog is linted together."""
    return catalog


_pause_lock = _thread.allocate_lock()
_pauses = [0, False]  # loads under way, and whether the first turned the collector off


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while catalogs load (in any thread), back on after the last.

    A catalog is many acyclic objects (each tool, its schema, its findings): the collector walked the
    growing heap again and again, a third of a warm lint of 1,213 tools (CPU 360 -> 250 ms in process).
    An embedding program that turned it off keeps it off."""
    with _pause_lock:
        if _pauses[0] == 0:
            _pauses[1] = gc.isenabled()
            gc.disable()
        _pauses[0] += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pauses[0] -= 1
            if _pauses[0] == 0 and _pauses[1]:
                gc.enable()


def load_checked_catalog(directory: Path, *, lint: bool = True,
                         on_loaded: Callable[[Catalog], None] | None = None,
                         names: Collection[str] | None = None,
                         lint_together: ToolPicker | None = every_tool,
                         wanted: Callable[[str], bool] | None = None, partial: bool = False,
                         refresh_servers: bool = False, required: Collection[str] | None = None,
                         cache: CatalogCache | None = None) -> Catalog:
    """The catalog of ``directory``, with ``findings`` when ``lint``.

    Raises ``LoadError`` listing every load problem of every file, or every lint error
    (then ``error.catalog`` is the catalog, findings included). ``on_loaded`` sees the
    catalog once it is linted, before lint errors are raised (to print a summary first).
    With ``names``, only the files that mention them are loaded (``toolrun call``), found
    through the cache's index where it knows the file unchanged, else by reading it, and
    taken from the cache when kept (a large toolset file is not parsed for one tool).
    ``lint_together`` picks the tools the side-by-side rules look at (None: no such rule
    runs); a picker that raises ``UserError`` leaves them out, for its caller to raise the
    same error once the catalog is shown. ``wanted`` says which tools the caller may use: an
    MCP server that offers none of them is not started (``catalog.unstarted``); None: the
    command may use every tool, so any broken file stops it. ``partial``: load problems never
    stop loading, they are in ``catalog.problems``. ``refresh_servers``: MCP servers are asked
    for their tools again, not served from the cache of their last answer. ``required``: the
    tool names the caller needs by name (see ``load_catalog``; ``names`` are by default).
    ``cache``: the directory's catalog cache, for a caller that asks it afterwards what it kept.
    """
    with collector_paused():  # a catalog is many acyclic objects: see collector_paused
        directory = Path(directory)
        cache = cache if cache is not None else CatalogCache.for_directory(directory)
        try:
            result = load_catalog(directory, names=names, cache=cache, wanted=wanted, refresh_servers=refresh_servers,
                                  required=required)
        except LoadError:
            raise
        except UserError as exc:  # a directory that is missing or unreadable: a load problem too
            raise LoadError(exc.problems) from None
        needed = set(names).__contains__ if names is not None else wanted
        if result.problems and not partial and not left_out_unneeded(result, needed):
            raise LoadError(result.problems)
        catalog = result.catalog
        catalog.problems = list(result.problems)
        if lint:
            findings = per_tool_findings(catalog, cache)
            together = _picked(lint_together, catalog, result.problems if not partial else [])
            if together is not None:
                # A recipe that picks no tool is not an empty catalog.
                findings += side_by_side_findings(together, directory, cache,
                                                  whole=bool(together or not (len(catalog) or result.problems)))
            elif not (len(catalog) or result.problems):  # an empty catalog is said by every command (not a broken one)
                findings += catalog_findings([], str(directory))
            catalog.findings = sort_findings(apply_ignores(findings, list(catalog)))
        cache.save()
        if on_loaded is not None:
            on_loaded(catalog)
        if catalog.lint_errors:
            raise LoadError([lint_problem(finding) for finding in catalog.lint_errors], catalog=catalog)
        return catalog


def side_by_side_findings(tools: list[Tool], directory: Path, cache: CatalogCache | None = None, *,
                          whole: bool = True) -> list[LintFinding]:
    """The findings of the rules about ``tools`` side by side: near duplicates and look-alike names, and with
    ``whole`` the catalog-wide ones (count, token cost). Kept in ``cache``: an unchanged catalog is not compared again."""
    key = cache.together_key(tools, whole) if cache is not None else None
    kept = cache.together_findings(key) if cache is not None and key is not None else None
    if kept is not None:
        return kept
    findings = near_duplicate_findings(tools) + look_alike_name_findings(tools)
    if whole:
        findings += catalog_findings(tools, str(directory))
    if cache is not None and key is not None:
        cache.put_together_findings(key, findings)
    return findings


def left_out_unneeded(result: LoadResult, needed: Callable[[str], bool] | None) -> bool:
    """Whether every file with a problem declares none of the tools ``needed`` says a command may use.

    A file whose names could not be read (a YAML error) may define any of them; a server that
    did not start is different: a name found in a healthy file is taken from there (whether
    the server defines it too is for ``toolrun tools lint`` to say).
    """
    if needed is None:
        return False
    for problem in result.problems:
        file = Path(problem.file) if problem.file is not None else None
        declared = result.names_by_file.get(file) if file is not None else None
        if declared is None or any(map(needed, declared)):
            return False
        if not declared and file not in result.server_files:
            return False
    return True


def per_tool_findings(catalog: Catalog, cache: CatalogCache | None = None) -> list[LintFinding]:
    """The findings of the rules that look at one tool alone, file by file (kept in ``cache``)."""
    by_file: dict[Path, list[Tool]] = {}
    for tool in catalog:
        by_file.setdefault(tool.source.file, []).append(tool)
    findings: list[LintFinding] = []
    for file, tools in by_file.items():
        kept = cache.findings(file) if cache is not None else None
        if kept is None:
            kept = [finding for tool in tools for finding in lint_tool(tool)]
            if cache is not None:
                cache.put_findings(file, kept)
        findings += kept
    return findings


def _picked(picker: ToolPicker | None, catalog: Catalog, left_out: list[Problem]) -> list[Tool] | None:
    if picker is None:
        return None
    try:
        return list(picker(catalog))
    except UserError as exc:
        if left_out:  # a tool the caller picks is missing, and a broken file may be where it is
            raise LoadError([*left_out, *exc.problems]) from None
        return None


def lint_problem(finding: LintFinding) -> Problem:
    """A lint finding as a problem to report (file, line, message and the rule's name)."""
    subject = f"{finding.tool}: " if finding.tool else ""
    return Problem(finding.file, finding.line, f"{subject}{finding.message} [{finding.rule}]")
