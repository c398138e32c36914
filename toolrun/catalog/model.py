"""The catalog: the tools of one tools directory, by name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from toolrun.core.errors import Problem
from toolrun.core.tool import SourceLocation, Tool

if TYPE_CHECKING:
    from toolrun.catalog.lint import LintFinding

DEFAULT_TOOLS_DIR = Path("tools.d")  # where commands look for tool files unless told otherwise


@dataclass(frozen=True)
class UnstartedTool:
    """A tool of an MCP server left unstarted because the command wanted none of that server's tools.

    Its name is known from the toolset file (``mcp_server.tools`` lists names, no globs);
    its description and schema would need the server, so it is not in ``Catalog.tools``.
    """

    name: str
    source: SourceLocation


@dataclass
class ServerOptions:
    """How one load treats MCP servers: ask them afresh (``refresh``); start one whose tools are not
    known without it (``start``, else its file goes to ``skipped``); and what it found worth saying."""

    refresh: bool = False
    start: bool = True
    skipped: list[Path] = field(default_factory=list)
    files: set[Path] = field(default_factory=set)  # the MCP server toolset files read (their names come from the server)
    notices: list[str] = field(default_factory=list)


# What loading a file gives for each name it defines: the Tool, an UnstartedTool, or None when broken.
LoadedTool = tuple[str, int | None, Tool | UnstartedTool | None]


@dataclass
class Catalog:
    """The tools of one tools directory, by name, in load order."""

    tools: dict[str, Tool] = field(default_factory=dict)
    directory: Path | None = None
    findings: list[LintFinding] = field(default_factory=list)  # the lint's, when it ran
    unstarted: dict[str, UnstartedTool] = field(default_factory=dict)  # MCP server tools not needed here
    problems: list[Problem] = field(default_factory=list)  # of the files left out of a partial catalog
    notices: list[str] = field(default_factory=list)  # what loading found worth saying (a server's tools changed)

    @property
    def lint_errors(self) -> list[LintFinding]:
        """Findings of severity error: a poisoned or broken tool that must not be offered to a model."""
        return [finding for finding in self.findings if finding.severity == "error" and not finding.ignored]

    def __iter__(self) -> Iterator[Tool]:
        return iter(self.tools.values())

    def __len__(self) -> int:
        return len(self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def get(self, name: str) -> Tool | None:
        return self.tools.get(name)
