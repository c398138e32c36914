"""How many times a connected MCP server of this process said its tools changed (``list_changed``).

A run, a chat or a server compares the number before and after: a catalog loaded at another
number may be out of date. Kept apart from ``toolrun.backends.mcp_server`` so that a run reads
it without importing the MCP backend (and its start-up cost) when no server was ever started.
"""

from __future__ import annotations

_generation = 0


def note_tools_changed() -> None:
    """Count one ``notifications/tools/list_changed`` (only the MCP hub's loop thread calls it)."""
    global _generation
    _generation += 1


def tool_list_generation() -> int:
    """A number that grows each time a connected server sends ``notifications/tools/list_changed``: a catalog
    loaded at another number may be out of date (load it again; the servers are asked afresh)."""
    return _generation
