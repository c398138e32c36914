"""The stdio transport over the official SDK: for the clients the lean server hands over.

``toolrun.mcp.lean_stdio`` serves stdio itself; a client it does not serve (a 2026-07-28 one,
one that opens without ``initialize``) comes here with the wire already claimed and its first
line replayed. It ends when stdin closes.
"""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from toolrun.mcp.server import CatalogServer
from toolrun.mcp.unreadable import AnsweringUnreadable


async def serve_stdio(server: CatalogServer, stdin: Any = None, stdout: Any = None) -> None:
    """Serve one client over ``stdin``/``stdout`` (the process's own when None) until it closes stdin."""
    async with stdio_server(stdin, stdout) as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(server.watch)
        # A line the SDK cannot read (nested too deep, not JSON) gets an error reply instead of silence.
        await server.server.run(AnsweringUnreadable(read_stream, write_stream), write_stream,
                                server.initialization_options())
        tasks.cancel_scope.cancel()
