"""The stdio transport: one client, the process's stdin and stdout; it ends when stdin closes."""

from __future__ import annotations

import anyio
from mcp.server.stdio import stdio_server

from toolrun.mcp.server import CatalogServer


async def serve_stdio(server: CatalogServer) -> None:
    """Serve one client over stdin/stdout until it closes stdin."""
    async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(server.watch)
        await server.server.run(read_stream, write_stream, server.initialization_options())
        tasks.cancel_scope.cancel()
