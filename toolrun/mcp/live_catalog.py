"""The catalog a long-running server serves: reloaded when the tools directory changes.

A file that stops loading (or whose tool fails the lint with an error) loses its tools and
keeps its problem visible; every other tool keeps working. Reloads are cheap when nothing
changed: the files' names and status (size, times, inode) are compared first, and only the
files written in the last seconds are read again. The catalog cache is not used: a server
loads each change itself.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from toolrun.backends.tool_list_changes import tool_list_generation
from toolrun.catalog.cache import RECENT_NS, status_key
from toolrun.catalog.gate import lint_problem
from toolrun.catalog.lint import lint_catalog
from toolrun.catalog.loader import TOOL_FILE_SUFFIXES, load_catalog, tool_files
from toolrun.catalog.model import Catalog
from toolrun.core.errors import Problem, UserError
from toolrun.core.secrets import env_references
from toolrun.core.text import did_you_mean, matches_any
from toolrun.core.tool import Tool

Signature = tuple[tuple[str, tuple[int, ...], str], ...]
WATCHED_SUFFIXES = (*TOOL_FILE_SUFFIXES, ".py")  # a python tool's code is part of the tool


def _digest(path: Path) -> str:
    try:
        return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    except OSError:
        return ""


@dataclass
class Snapshot:
    """One load of the directory: the tools that may be served, and what kept the others out."""

    catalog: Catalog
    problems: list[Problem] = field(default_factory=list)
    secrets: tuple[str, ...] = ()  # the values of the ${env:NAME} the tool files name, set in the environment
    unmatched: list[tuple[str, str | None]] = field(default_factory=list)  # (--tools glob matching no tool, a guess)
    # The tool names each problem concerns, in the order of ``problems``; None: the whole file or directory.
    concerns: list[tuple[str, ...] | None] = field(default_factory=list)


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


def _declared(names_by_file: dict[Path, list[str]], problem: Problem) -> tuple[str, ...] | None:
    names = names_by_file.get(Path(problem.file)) if problem.file is not None else None
    return tuple(names) if names else None


class LiveCatalog:
    """The tools of ``directory`` (limited to ``selection`` globs), reloaded when its files change."""

    def __init__(self, directory: Path, selection: Sequence[str] | None = None) -> None:
        self.directory = directory
        self.selection = list(selection) if selection else None
        self._signature: Signature | None = None
        self._digests: dict[str, tuple[tuple[int, ...], str]] = {}  # path -> (status key, content digest)
        self.snapshot = Snapshot(Catalog(directory=directory))

    def signature(self) -> Signature:
        """Every tool file and python source (subfolders too) with its status and content digest: any edit,
        addition, move or removal changes it — also an edit within the clock tick of the last one (the
        content of a file written in the last seconds is read each time; an older one's while its status holds)."""
        found: list[tuple[str, tuple[int, ...], str]] = []
        digests: dict[str, tuple[tuple[int, ...], str]] = {}
        for path in tool_files(self.directory, WATCHED_SUFFIXES):
            name = str(path)
            try:
                key = status_key(path.stat())
            except OSError:  # a broken symlink or a file removed meanwhile: the load reports it
                found.append((name, (), ""))
                continue
            known = self._digests.get(name)
            if known is not None and known[0] == key and max(key[1], key[2]) <= time.time_ns() - RECENT_NS:
                digest = known[1]
            else:
                digest = _digest(path)
            digests[name] = (key, digest)
            found.append((name, key, digest))
        self._digests = digests
        # An MCP server's notifications/tools/list_changed changes it too: the next refresh lists its tools again.
        found.append(("mcp tools/list_changed", (tool_list_generation(),), ""))
        return tuple(found)

    def refresh(self) -> bool:
        """Reload when the files changed since the last load; True when a reload happened.

        A changed ``.py`` file makes the python tools' code be imported again at their next call, and an
        MCP server (``mcp_server`` file) that stopped is started again.
        Raises ``UserError`` only when the directory itself is missing.
        """
        signature = self.signature()
        if signature == self._signature:
            return False
        if self._signature is not None:
            self._forget_what_changed(signature, self._signature)
        self._signature = signature
        self.snapshot = self._load()
        return True

    @staticmethod
    def _forget_what_changed(signature: Signature, before: Signature) -> None:
        """Drop the imported code of edited ``.py`` files, and the MCP servers that stopped (the change may fix them)."""
        from toolrun.backends.mcp_server import forget_stopped_servers

        edited = {entry[0] for entry in set(signature) ^ set(before) if entry[0].endswith(".py")}
        if edited:
            from toolrun.backends.python import forget_imported_code

            forget_imported_code(Path(name) for name in edited)
        forget_stopped_servers()

    def _load(self) -> Snapshot:
        try:
            # An MCP server toolset that lists its tools by name, none of them selected, is not started.
            result = load_catalog(self.directory, wanted=lambda name: matches_any(name, self.selection))
        except UserError as exc:
            return Snapshot(Catalog(directory=self.directory), list(exc.problems), concerns=[None] * len(exc.problems))
        secrets = _named_secrets(self.directory)
        catalog = result.catalog
        catalog.findings = lint_catalog(catalog)
        problems = list(result.problems)
        # A load problem concerns every tool its file declares; none known (a YAML error, a server down): the file.
        concerns = [_declared(result.names_by_file, problem) for problem in problems]
        poisoned = {finding.tool for finding in catalog.lint_errors if finding.tool}
        problems += [lint_problem(finding) for finding in catalog.lint_errors]
        concerns += [(finding.tool,) if finding.tool else None for finding in catalog.lint_errors]
        served = {name: tool for name, tool in catalog.tools.items()
                  if name not in poisoned and matches_any(name, self.selection)}
        return Snapshot(Catalog(served, self.directory, catalog.findings), problems, secrets,
                        self._unmatched([*catalog.tools, *catalog.unstarted]), concerns)

    def problems_for(self, visible: Sequence[str] | None) -> list[Problem]:
        """The problems a client limited to ``visible`` globs may read: those of tools it can see, every one of
        them; a problem of a whole file only when it may see every tool (None, or ``*``)."""
        every = visible is None or "*" in visible
        snapshot = self.snapshot
        return [problem for problem, names in zip(snapshot.problems, snapshot.concerns, strict=True)
                if every or (names is not None and all(matches_any(name, visible) for name in names))]

    def _unmatched(self, names: list[str]) -> list[tuple[str, str | None]]:
        """The selection's globs that match none of ``names`` (a typo serves nothing), each with a guess."""
        return [(glob, did_you_mean(glob, names)) for glob in self.selection or ()
                if not any(fnmatch.fnmatchcase(name, glob) for name in names)]

    def tools(self, visible: Sequence[str] | None = None) -> list[Tool]:
        """The served tools a client limited to ``visible`` globs (None: all) may see, in load order."""
        return [tool for tool in self.snapshot.catalog if matches_any(tool.name, visible)]

    def get(self, name: str, visible: Sequence[str] | None = None) -> Tool | None:
        """The served tool ``name`` if the client may see it, else None."""
        tool = self.snapshot.catalog.get(name)
        return tool if tool is not None and matches_any(name, visible) else None
