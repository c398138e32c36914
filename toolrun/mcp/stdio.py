"""The stdio transport: one client, the process's stdin and stdout; it ends when stdin closes."""

from __future__ import annotations

import anyio
from mcp.server.stdio import stdio_server

from toolrun.mcp.server import CatalogServer
from toolrun.mcp.unreadable import AnsweringUnreadable


async def serve_stdio(server: CatalogServer) -> None:
    """Serve one client over stdin/stdout until it closes stdin."""
    async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(server.watch)
        # A line the SDK cannot read (nested too deep, not JSON) gets an error reply instead of silence.
        await server.server.run(AnsweringUnreadable(read_stream, write_stream), write_stream,
                                server.initialization_options())
        tasks.cancel_scope.cancel()
