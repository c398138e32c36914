"""Streamable HTTP at ``/mcp``: the request gate (Origin, bearer tokens) in front of the SDK's app.

The gate answers before the SDK sees a request: 403 for a browser ``Origin`` that is not
the server's own (the protocol's defence against DNS rebinding), 401 without a known
bearer token when an access list is in force. An admitted request carries its ``Caller``
in the ASGI scope, where the tool handlers read which tools it may see and call.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

import anyio
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from toolrun.mcp.access import AccessList
from toolrun.mcp.addresses import allowed_origins, is_loopback
from toolrun.mcp.server import CALLER_SCOPE_KEY, Caller, CatalogServer

MCP_PATH = "/mcp"


class RequestGate:
    """ASGI middleware: Origin check, then bearer-token check, then the SDK's app."""

    def __init__(self, app: ASGIApp, *, origins: list[str], access: AccessList | None) -> None:
        self.app = app
        self.origins = set(origins)
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            await _refuse(send, 403, "forbidden", f"Origin {origin} is not allowed")
            return
        if self.access is None:
            scope[CALLER_SCOPE_KEY] = Caller()
        else:
            client = self.access.client_for(headers.get("authorization"))
            if client is None:
                await _refuse(send, 401, "unauthorized", "a known bearer token is required",
                              [(b"www-authenticate", b'Bearer realm="toolrun"')])
                return
            scope[CALLER_SCOPE_KEY] = Caller(client.name, client.tools)
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, error: str, message: str,
                  extra_headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": error, "message": message}).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra_headers or [])})
    await send({"type": "http.response.body", "body": body})


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: any free port); OSError when it is taken."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(1024)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def build_app(server: CatalogServer, host: str, port: int, access: AccessList | None) -> ASGIApp:
    """The SDK's streamable HTTP app at ``/mcp`` behind the gate."""
    security = TransportSecuritySettings(
        # The gate checks Origin; a Host check would refuse a team's DNS name for the server.
        enable_dns_rebinding_protection=is_loopback(host),
        allowed_hosts=[f"{name}:*" for name in ("127.0.0.1", "localhost", "[::1]")],
        allowed_origins=allowed_origins(host, port),
    )
    app = server.server.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=security, host=host)
    return RequestGate(app, origins=allowed_origins(host, port), access=access)


async def serve_http(server: CatalogServer, sock: socket.socket, access: AccessList | None,
                     on_ready: Callable[[str], None]) -> None:
    """Serve until SIGINT/SIGTERM; ``on_ready`` gets the URL once the socket accepts connections."""
    host, port = sock.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    app: Any = build_app(server, shown_host, port, access)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2,
                            access_log=False)
    http_server = uvicorn.Server(config)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.watch)
        on_ready(f"http://{shown_host}:{port}{MCP_PATH}")
        await http_server.serve(sockets=[sock])
        tasks.cancel_scope.cancel()
