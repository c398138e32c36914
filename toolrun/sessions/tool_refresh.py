"""Tools an MCP server adds or removes while a run or a chat goes on (``notifications/tools/list_changed``).

When a connected server says its tool list changed, the catalog is loaded again — the
servers are asked afresh and every tool goes through the same lint gate as at start (a
tool with a lint error is left out, the others stay) — and the run offers the new list
from its next request. Nothing is reloaded while no server has said anything.
"""

from __future__ import annotations

import asyncio

from toolrun.backends.tool_list_changes import tool_list_generation
from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.model import Catalog
from toolrun.core.errors import LoadError
from toolrun.core.text import matches_any
from toolrun.core.tool import Tool


class ServerToolWatch:
    """The catalog of a run or chat, loaded again when a server of this process changed its tools."""

    def __init__(self, catalog: Catalog, patterns: list[str] | None) -> None:
        self.catalog = catalog
        self.patterns = patterns  # the recipe's tools (names or globs); None: every tool
        self.generation = tool_list_generation()

    def reloaded(self) -> Catalog | None:
        """The catalog loaded again when a server said its tools changed since the last look; else None."""
        now = tool_list_generation()
        if now == self.generation:
            return None
        self.generation = now  # seen, also when there is nothing to load again: the next look is a number compared
        if self.catalog.directory is None:  # a catalog built in code: no folder to read the tools from again
            return None
        try:
            catalog = load_checked_catalog(self.catalog.directory, wanted=lambda name: matches_any(name, self.patterns))
        except LoadError as exc:
            if exc.catalog is None:  # the directory no longer loads: the run keeps the tools it has
                return None
            catalog = exc.catalog
            poisoned = {finding.tool for finding in catalog.lint_errors}
            catalog = Catalog({name: tool for name, tool in catalog.tools.items() if name not in poisoned},
                              catalog.directory, catalog.findings)
        self.catalog = catalog
        return catalog

    async def changed_tools(self) -> list[Tool] | None:
        """The run's tools when they changed (``run_conversation(tools_update=...)``), else None.

        Asked before every request, on the event loop: while no server said anything that is one
        number compared, with no thread (a thread each turn started the loop's default executor,
        an import and a thread per run). Only a reload, which asks the servers again, goes to a thread.
        """
        if tool_list_generation() == self.generation:
            return None
        if self.catalog.directory is None:
            catalog = self.reloaded()  # nothing to read again: it only notes the change
        else:
            catalog = await asyncio.to_thread(self.reloaded)
        if catalog is None:
            return None
        return [tool for tool in catalog if matches_any(tool.name, self.patterns)]
