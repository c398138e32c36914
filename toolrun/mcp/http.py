"""Streamable HTTP at ``/mcp``: the request gate (Origin, bearer tokens) in front of the SDK's app.

The gate answers before the SDK sees a request: 403 for a browser ``Origin`` that is not
the server's own or one of ``--allow-origin`` (the protocol's defence against DNS
rebinding), a CORS preflight from an allowed origin (it carries no token), then 401
without a known bearer token when an access list is in force — a static client's token, or
a JWT of the ``oidc`` issuer (checked in a worker thread: it may fetch the issuer's keys),
whose refusal is an audit line naming the token's subject. With ``oidc``, the RFC 9728
metadata is public at ``/.well-known/oauth-protected-resource``. An admitted request carries its ``Caller``
in the ASGI scope, where the tool handlers read which tools it may see and call, and the
session manager whose sessions it may use (``sessions``); while it is served, ``REQUEST_CALLER``
holds it too, for the SDK's look-up of a tool's schema, which sees no request. Under uvicorn runs a protocol
with header and body deadlines and a bound on connections (``deadlines``), draining at
SIGTERM (``drain``); ``/healthz`` and ``/readyz`` are answered before the gate (``health``),
``/metrics`` on an address of its own (``metrics``).
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from collections.abc import Callable
from typing import Any

import anyio
import uvicorn
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from toolrun.mcp.access import AccessList, ClientAccess
from toolrun.mcp.addresses import allowed_origins, is_loopback
from toolrun.mcp.audit import AuditLog
from toolrun.mcp.deadlines import deadline_protocol
from toolrun.mcp.drain import DrainingServer, shutdown_bound
from toolrun.mcp.hangup import HeldHangup
from toolrun.mcp.health import HealthRoutes, Readiness
from toolrun.mcp.limits import HttpLimits, SessionLimits
from toolrun.mcp.oidc import TokenRefused, TokenVerifier
from toolrun.mcp.protected_resource import ProtectedResource
from toolrun.mcp.server import CALLER_SCOPE_KEY, REQUEST_CALLER, Caller, CatalogServer
from toolrun.mcp.service import ServiceOptions
from toolrun.mcp.sessions import BoundSessionManager

MCP_PATH = "/mcp"
# What a browser client sends and must read: the session and protocol headers of streamable HTTP.
CORS_ALLOWED_HEADERS = "authorization, content-type, accept, mcp-protocol-version, mcp-session-id, last-event-id"
CORS_EXPOSED_HEADERS = "Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate"
CORS_METHODS = "GET, POST, DELETE, OPTIONS"


class RequestGate:
    """ASGI middleware: the public resource metadata, Origin check, bearer-token check, then the SDK's app."""

    def __init__(self, app: ASGIApp, *, origins: list[str], access: AccessList | None,
                 cors_origins: list[str] | tuple[str, ...] = (), resource_url: str | None = None,
                 audit: AuditLog | None = None, verifier: TokenVerifier | None = None,
                 on_refused: Callable[[str], None] = lambda reason: None) -> None:
        self.app = app
        self.origins = set(origins)
        self.cors_origins = set(cors_origins)
        self.access = access
        self.audit = audit
        oidc = access.oidc if access is not None else None
        self.verifier = verifier or (TokenVerifier(oidc) if oidc is not None else None)
        self.resource = ProtectedResource.of(oidc, resource_url) if oidc is not None else None
        self.on_refused = on_refused  # the reason of each refusal, for the metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.resource is not None and scope["path"] in self.resource.paths() and scope["method"] in ("GET", "HEAD"):
            await _answer_metadata(send, self.resource.document())
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}
        origin = headers.get("origin")
        cross_origin = origin is not None and origin in self.cors_origins
        if origin is not None and origin not in self.origins and not cross_origin:
            self.on_refused("origin")
            await _refuse(send, 403, "forbidden", f"Origin {origin} is not allowed")
            return
        if cross_origin:
            assert origin is not None
            if scope["method"] == "OPTIONS":
                await _answer_preflight(send, origin)
                return
            send = _with_cors_headers(send, origin)
        caller = await self._caller(headers.get("authorization"), send)
        if caller is None:
            return
        scope[CALLER_SCOPE_KEY] = caller
        admitted = REQUEST_CALLER.set(caller)
        try:
            await self.app(scope, receive, send)
        finally:
            REQUEST_CALLER.reset(admitted)

    async def _caller(self, authorization: str | None, send: Send) -> Caller | None:
        """Who the request comes from; None once it has been answered 401."""
        if self.access is None:
            return Caller()
        client = self.access.client_for(authorization)
        token = bearer_token(authorization)
        if client is not None:
            return caller_of(client, token)
        refusal = "a known bearer token is required"
        if self.verifier is not None and token is not None and token.count(".") == 2:
            try:
                verified = await anyio.to_thread.run_sync(self.verifier.verify, token)
            except TokenRefused as refused:
                if self.audit is not None:
                    self.audit.refused(subject=refused.subject, issuer=self.verifier.settings.issuer, reason=refused.reason)
                refusal = f"the token was refused: {refused.reason}"
            else:
                return Caller(verified.subject, verified.tools, identity=f"oidc:{verified.identity}", credential=token)
        self.on_refused("no_token" if token is None else "refused_jwt" if refusal != "a known bearer token is required"
                        else "unknown_token")
        challenge = self.resource.challenge(invalid_token=token is not None) if self.resource else b'Bearer realm="toolrun"'
        await _refuse(send, 401, "unauthorized", refusal, [(b"www-authenticate", challenge)])
        return None


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header, else None."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


async def _answer_metadata(send: Send, body: bytes) -> None:
    # Public and the same for everyone: any page may read it (a browser client discovers the issuer this way).
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"access-control-allow-origin", b"*"), (b"cache-control", b"max-age=3600")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def caller_of(client: ClientAccess, token: str | None = None) -> Caller:
    """A static client's caller: its sessions belong to its name (not its token, which may be replaced);
    ``token``, the one it presented, is redacted from what its calls write."""
    return Caller(client.name, client.tools, identity=f"token:{client.name}", max_sessions=client.max_sessions,
                  credential=token)


async def _answer_preflight(send: Send, origin: str) -> None:
    headers = [(b"access-control-allow-origin", origin.encode("latin-1")),
               (b"access-control-allow-methods", CORS_METHODS.encode()),
               (b"access-control-allow-headers", CORS_ALLOWED_HEADERS.encode()),
               (b"access-control-max-age", b"600"), (b"vary", b"Origin"), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _with_cors_headers(send: Send, origin: str) -> Send:
    """``send`` adding the headers that let a page of ``origin`` read the answer and its session id."""
    added = [(b"access-control-allow-origin", origin.encode("latin-1")),
             (b"access-control-expose-headers", CORS_EXPOSED_HEADERS.encode()), (b"vary", b"Origin")]

    async def send_with_cors(message: Any) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *added]}
        await send(message)

    return send_with_cors


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


def build_app(server: CatalogServer, host: str, port: int, access: AccessList | None,
              sessions: SessionLimits | None = None, cors_origins: list[str] | tuple[str, ...] = (),
              readiness: Readiness | None = None, resource_url: str | None = None,
              verifier: TokenVerifier | None = None) -> ASGIApp:
    """The SDK's streamable HTTP app at ``/mcp`` behind the gate, its sessions bound and limited (none kept
    when the server is stateless), and the health routes in front of both."""
    security = TransportSecuritySettings(
        # The gate checks Origin; a Host check would refuse a team's DNS name for the server.
        enable_dns_rebinding_protection=is_loopback(host),
        allowed_hosts=[f"{name}:*" for name in ("127.0.0.1", "localhost", "[::1]")],
        allowed_origins=[*allowed_origins(host, port), *cors_origins],
    )
    manager = BoundSessionManager(server.server, limits=sessions or SessionLimits(), security_settings=security,
                                  stateless=server.stateless)
    server.metrics.count_sessions(lambda: len(manager.ledger))
    # What the SDK's streamable_http_app builds, with this session manager in place of its own.
    app = Starlette(routes=[Route(MCP_PATH, endpoint=StreamableHTTPASGIApp(manager))],
                    lifespan=lambda _app: manager.run())
    gate = RequestGate(app, origins=allowed_origins(host, port), access=access, cors_origins=cors_origins,
                       resource_url=resource_url, audit=server.audit, verifier=verifier,
                       on_refused=server.metrics.auth_failed)
    return HealthRoutes(gate, readiness or Readiness(loaded=True))


def http_server_for(server: CatalogServer, sock: socket.socket, access: AccessList | None,
                    limits: HttpLimits | None = None, cors_origins: list[str] | tuple[str, ...] = (),
                    service: ServiceOptions | None = None, resource_url: str | None = None,
                    verifier: TokenVerifier | None = None) -> DrainingServer:
    """The uvicorn server of ``sock``: the app, the client deadlines, and the drain at SIGTERM."""
    limits = limits or HttpLimits()
    service = service or ServiceOptions()
    host, port = sock.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    readiness = Readiness(loaded=True)  # the catalog loaded before the socket was bound
    app: Any = build_app(server, shown_host, port, access, limits.sessions, cors_origins, readiness, resource_url, verifier)
    protocol = deadline_protocol(limits.header_timeout, limits.body_timeout, limits.max_connections)
    # log_config=None: the command's own logging (terminal-safe lines) prints uvicorn's warnings too.
    config = uvicorn.Config(app, http=protocol, log_level="warning", log_config=None, lifespan="on",
                            timeout_graceful_shutdown=shutdown_bound(), access_log=False)
    return DrainingServer(config, readiness=readiness, drain_delay=service.drain_delay,
                          calls_in_flight=lambda: server.calls_in_flight,
                          # the tools served when the drain starts: a tool added since has its own timeout
                          call_timeout=lambda: max((tool.timeout for tool in server.live.tools()), default=0.0),
                          report=server.report)


async def serve_http(server: CatalogServer, sock: socket.socket, access: AccessList | None,
                     on_ready: Callable[[str], None], limits: HttpLimits | None = None,
                     cors_origins: list[str] | tuple[str, ...] = (), service: ServiceOptions | None = None,
                     resource_url: str | None = None, verifier: TokenVerifier | None = None,
                     hangup: HeldHangup | None = None) -> None:
    """Serve until SIGTERM has drained the server, or SIGINT; ``on_ready`` gets the URL once the socket
    accepts connections. ``hangup``: SIGHUP kept while the server started (the audit log is reopened once)."""
    http_server = http_server_for(server, sock, access, limits, cors_origins, service, resource_url, verifier)
    host, port = sock.getsockname()[:2]
    shown_host = f"[{host}]" if ":" in host else host
    if server.audit is not None and server.audit.path is not None and hasattr(signal, "SIGHUP"):
        # SIGHUP (logrotate's postrotate) opens the audit log's path again, instead of ending the server
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGHUP, server.audit.reopen)
        if hangup is not None and hangup.taken():
            loop.call_soon(server.audit.reopen)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(server.watch)
        tasks.start_soon(_announce_when_started, http_server, lambda: on_ready(f"http://{shown_host}:{port}{MCP_PATH}"))
        await http_server.serve(sockets=[sock])
        tasks.cancel_scope.cancel()


async def _announce_when_started(http_server: uvicorn.Server, announce: Callable[[], None]) -> None:
    # Only once uvicorn has started are its signal handlers in place: a SIGTERM sent on seeing the URL drains.
    while not http_server.started and not http_server.should_exit:
        await anyio.sleep(0.01)
    if http_server.started:
        announce()
