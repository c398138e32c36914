"""Servers written with the MCP SDK (``MCPServer``, the SDK's FastMCP) that exercise toolrun's client.

One server, ``protocol_server()``, lists its tools two to a page, answers with an image, adds a
tool at run time (and says so with ``notifications/tools/list_changed``) and tells who called it.
``served(app)`` runs any of its ASGI apps (streamable HTTP or the legacy HTTP+SSE) on a free
loopback port in a thread of the test process, and stops it at the end.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp_types import ListToolsResult, ToolListChangedNotification

from tests.mcp_helpers import close_client_connections

# A 1x1 PNG: a real image a provider would accept.
PIXEL_PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")

PAGE_SIZE = 2
DESCRIPTION = ("Answers {what}. Use it to check {what} of the test server; do not use it for anything else. "
               "It changes nothing.")
# The methods the server was sent, in order, and "DELETE" for a session ended (every server of the test process appends here).
SEEN_METHODS: list[str] = []


def protocol_server(name: str = "protocol") -> Any:
    """An ``MCPServer`` whose ``tools/list`` pages, with the tools the tests call."""
    class PagedServer(MCPServer):
        async def _handle_list_tools(self, ctx: Any, params: Any) -> ListToolsResult:
            tools = await self.list_tools()
            start = int(params.cursor) if params is not None and params.cursor else 0
            following = start + PAGE_SIZE
            return ListToolsResult(tools=tools[start:following], next_cursor=str(following) if following < len(tools) else None)

    server = PagedServer(name)

    @server.tool(description=DESCRIPTION.format(what="the name and version of the client"))
    def client_identity(ctx: Context) -> str:
        info = ctx.session.client_params.client_info
        return json.dumps({"name": info.name, "version": info.version})

    @server.tool(description=DESCRIPTION.format(what="a one-pixel PNG image with a caption"))
    def pixel() -> list[str | Image]:
        return ["one red pixel", Image(data=PIXEL_PNG, format="png")]

    for index in range(3):  # more tools than one page holds
        server.add_tool(lambda index=index: f"filler {index}", name=f"filler_{index}",
                        description=DESCRIPTION.format(what=f"the word filler and the number {index}"))

    @server.tool(description=DESCRIPTION.format(what="after adding the tool late_tool to the server"))
    async def add_late_tool(ctx: Context) -> str:
        server.add_tool(lambda: "late", name="late_tool", description=DESCRIPTION.format(what="the word late"))
        # On this request's own stream, so toolrun hears of the change before the result: on the session's
        # stream (the SDK's default) it could come after toolrun has already asked its model again.
        await ctx.session.send_notification(ToolListChangedNotification(), related_request_id=ctx.request_id)
        return "added late_tool"

    return server


def recording_methods(app: Any) -> Any:
    """``app`` behind a recorder of the JSON-RPC methods POSTed to it (``SEEN_METHODS``)."""

    async def recorded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "DELETE":
            SEEN_METHODS.append("DELETE")  # a client ending its session
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            SEEN_METHODS.append(json.loads(body).get("method", "(answer)"))
        except (ValueError, AttributeError):
            pass
        delivered = False

        async def replay() -> Any:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return recorded


@contextmanager
def served(app: Any) -> Iterator[str]:
    """``app`` on a free 127.0.0.1 port (uvicorn in a daemon thread); yields ``http://127.0.0.1:PORT``."""
    import uvicorn

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    base = f"http://127.0.0.1:{port}"
    try:
        yield base
    finally:
        close_client_connections(base)  # else the server's shutdown waits out its grace for their streams
        server.should_exit = True
        thread.join(10)
        listener.close()
