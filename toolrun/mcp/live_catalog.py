"""The catalog a long-running server serves: reloaded when the tools directory changes.

A file that stops loading (or whose tool fails the lint with an error) loses its tools and
keeps its problem visible; every other tool keeps working. Reloads are cheap when nothing
changed: the directory's file names, sizes and modification times are compared first.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from toolrun.catalog.gate import lint_problem
from toolrun.catalog.lint import lint_catalog
from toolrun.catalog.loader import load_catalog, tool_files
from toolrun.catalog.model import Catalog
from toolrun.errors import Problem, UserError
from toolrun.secrets import env_references
from toolrun.tool import Tool

Signature = tuple[tuple[str, int, int], ...]


def matches_any(name: str, globs: Sequence[str] | None) -> bool:
    """True when ``name`` matches one of ``globs``; None (no selection) matches every name."""
    return globs is None or any(fnmatch.fnmatchcase(name, glob) for glob in globs)


@dataclass
class Snapshot:
    """One load of the directory: the tools that may be served, and what kept the others out."""

    catalog: Catalog
    problems: list[Problem] = field(default_factory=list)
    secrets: tuple[str, ...] = ()  # the values of the ${env:NAME} the tool files name, set in the environment


def _named_secrets(directory: Path) -> tuple[str, ...]:
    """The values of the variables the tool files read through ``${env:NAME}``: a call that never read one
    (its arguments were invalid, its approval refused) may still be sent one, and the audit log must not show it."""
    values: dict[str, None] = {}
    for path in tool_files(directory):
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for name in env_references(text):
            value = os.environ.get(name)
            if value:
                values[value] = None
    return tuple(values)


class LiveCatalog:
    """The tools of ``directory`` (limited to ``selection`` globs), reloaded when its files change."""

    def __init__(self, directory: Path, selection: Sequence[str] | None = None) -> None:
        self.directory = directory
        self.selection = list(selection) if selection else None
        self._signature: Signature | None = None
        self.snapshot = Snapshot(Catalog(directory=directory))

    def signature(self) -> Signature:
        """Path, size and mtime of every tool file (subfolders too): any edit, addition, move or removal changes it."""
        found = []
        for path in tool_files(self.directory):
            try:
                stat = path.stat()
            except OSError:  # a broken symlink or a file removed meanwhile: the load reports it
                found.append((str(path), -1, -1))
                continue
            found.append((str(path), stat.st_size, stat.st_mtime_ns))
        return tuple(found)

    def refresh(self) -> bool:
        """Reload when the files changed since the last load; True when a reload happened.

        Raises ``UserError`` only when the directory itself is missing.
        """
        signature = self.signature()
        if signature == self._signature:
            return False
        self._signature = signature
        self.snapshot = self._load()
        return True

    def _load(self) -> Snapshot:
        try:
            result = load_catalog(self.directory)
        except UserError as exc:
            return Snapshot(Catalog(directory=self.directory), list(exc.problems))
        secrets = _named_secrets(self.directory)
        catalog = result.catalog
        catalog.findings = lint_catalog(catalog)
        problems = list(result.problems)
        poisoned = {finding.tool for finding in catalog.lint_errors if finding.tool}
        problems += [lint_problem(finding) for finding in catalog.lint_errors]
        served = {name: tool for name, tool in catalog.tools.items()
                  if name not in poisoned and matches_any(name, self.selection)}
        return Snapshot(Catalog(served, self.directory, catalog.findings), problems, secrets)

    def tools(self, visible: Sequence[str] | None = None) -> list[Tool]:
        """The served tools a client limited to ``visible`` globs (None: all) may see, in load order."""
        return [tool for tool in self.snapshot.catalog if matches_any(tool.name, visible)]

    def get(self, name: str, visible: Sequence[str] | None = None) -> Tool | None:
        """The served tool ``name`` if the client may see it, else None."""
        tool = self.snapshot.catalog.get(name)
        return tool if tool is not None and matches_any(name, visible) else None
