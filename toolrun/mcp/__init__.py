"""Serve a tool catalog over the Model Context Protocol (``toolrun mcp``).

``serve`` is the whole feature: stdio by default, streamable HTTP at ``/mcp`` with
``http="HOST:PORT"``. The official ``mcp`` SDK is imported only for HTTP, and for a stdio
client the lean stdio server hands over; ``import toolrun`` and the other commands never pay for it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from toolrun.core.errors import Problem, UserError
from toolrun.mcp.addresses import check_origin, is_loopback, parse_address
from toolrun.mcp.hangup import HeldHangup
from toolrun.mcp.limits import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    HttpLimits,
    SessionLimits,
    resolve_session_limits,
)
from toolrun.mcp.service import DEFAULT_DRAIN_DELAY, ServiceOptions, parse_metrics_address

if TYPE_CHECKING:
    from toolrun.mcp.access import AccessList, InlineAuth
    from toolrun.mcp.catalog_service import CatalogService
    from toolrun.mcp.metrics import GatewayMetrics
    from toolrun.mcp.oidc import TokenVerifier

__all__ = ["parse_address", "serve"]


def serve(
    tools_dir: Path,
    *,
    tools: Sequence[str] | None = None,
    http: str | None = None,
    auth: Path | InlineAuth | None = None,
    audit: Path | None = None,
    assume_yes: bool = False,
    report: Callable[[str], None] = lambda line: None,
    max_sessions: int | None = None,
    max_client_sessions: int | None = None,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    recipes: Path | None = None,
    allow_origins: Sequence[str] = (),
    resource_url: str | None = None,
    metrics_listen: str | None = None,
    drain_delay: float = DEFAULT_DRAIN_DELAY,
    stateless: bool = False,
) -> None:
    """Serve the catalog of ``tools_dir`` until the client leaves (stdio) or the process is stopped (HTTP).

    ``report`` receives the lines meant for the operator: what is served, load problems,
    the URL. Raises ``UserError`` (exit 2) for a missing tools directory, a bad address,
    an unreadable ``--auth`` file, or a non-loopback address without ``--auth``, or session
    limits that let one client fill the server. Over HTTP, a client holds at most
    ``max_client_sessions`` sessions (its own ``max_sessions`` in the auth file), the server
    ``max_sessions``; a request has ``header_timeout`` seconds to send its headers and
    ``body_timeout`` more for its body; at most ``max_connections`` connections are open.
    With ``recipes``, each recipe of that folder is also served as a prompt. Over HTTP, browser
    pages of ``allow_origins`` (``https://host[:port]``) may call the server (CORS). ``auth``: a file or a
    config file's mapping; ``resource_url``: the public URL, the audience of ``oidc`` tokens by default.
    ``metrics_listen``, ``drain_delay``, ``stateless``: the server as a service (docs/gateway.md).
    """
    address = parse_address(http) if http is not None else None
    _check_place(address, auth, tools_dir)
    origins = _checked_additions(address, recipes, allow_origins)
    service = _service_options(address, metrics_listen, drain_delay, stateless)
    from toolrun.mcp.access import read_access_list
    access = read_access_list(auth, resource_url) if auth is not None else None  # a bad file fails before the SDK loads
    limits = HttpLimits(_session_limits(access, auth, max_sessions, max_client_sessions), header_timeout,
                        body_timeout, max_connections)

    from toolrun.core.secrets import Redactor, redacting

    # A SIGHUP from the moment the audit file opens reopens it once the server runs (see toolrun.mcp.hangup).
    with HeldHangup(active=address is not None and audit is not None) as hangup:
        # Over HTTP every call is audited (stderr by default); over stdio only when asked.
        server = _catalog_server(tools_dir, tools, recipes, report, audit, audited=audit is not None or address is not None,
                                 assume_yes=assume_yes, stateless=service.stateless, sdk=address is not None)
        # The tokens are secrets of the whole server: no call's output or log line may show them.
        with redacting(Redactor(access.secrets if access else ())), _audit_closed_after(server):
            server.load()
            if address is None:
                _serve_stdio(server)
            else:
                _serve_http(server, address, http, access, report, limits, origins, service, resource_url, hangup)


@contextmanager
def _audit_closed_after(server: CatalogService) -> Iterator[None]:
    try:
        yield
    finally:
        if server.audit is not None:
            server.audit.close()


def _catalog_server(tools_dir: Path, tools: Sequence[str] | None, recipes: Path | None, report: Callable[[str], None],
                    audit: Path | None, *, audited: bool, assume_yes: bool, stateless: bool,
                    sdk: bool) -> CatalogService:
    """The server of the catalog, with its audit log (at ``audit``, else stderr) when ``audited``; over the SDK
    when ``sdk`` (HTTP), else the SDK-free service the lean stdio server serves."""
    from toolrun.mcp.audit import AuditLog
    from toolrun.mcp.catalog_service import CatalogService
    from toolrun.mcp.live_catalog import LiveCatalog
    from toolrun.mcp.prompts import RecipePrompts

    try:
        audit_log = AuditLog.open(audit) if audited else None
    except OSError as exc:  # a folder not made yet, one given as the file, no permission
        raise UserError(Problem(audit, None, f"cannot open the audit log: {exc.strerror or exc}",
                                "create its folder, or give --audit a file this user may write")) from None
    prompts = RecipePrompts(recipes, report) if recipes is not None else None
    kind: type[CatalogService] = CatalogService
    if sdk:
        from toolrun.mcp.server import CatalogServer
        kind = CatalogServer
    return kind(LiveCatalog(tools_dir, tools), assume_yes=assume_yes, audit=audit_log, report=report,
                prompts=prompts, stateless=stateless)


def _check_place(address: tuple[str, int] | None, auth: Path | InlineAuth | None, tools_dir: Path) -> None:
    """Refuse a non-loopback address without ``--auth``, and a missing tools directory."""
    if address is not None and auth is None:
        if not is_loopback(address[0]):
            raise UserError(Problem(None, None, f"refusing to serve on {address[0]} without --auth: "
                                                "anyone who can reach it could call every tool",
                                    "pass --auth FILE listing the clients and their tokens (see docs/mcp.md), "
                                    "or bind to 127.0.0.1"))
    if address is None and (sys.__stdin__ is None or sys.__stdout__ is None):  # closed when the process started
        raise UserError(Problem(None, None, "stdin or stdout is closed: over stdio the MCP client writes to the "
                                            "server's stdin and reads its stdout",
                                "start toolrun mcp from an MCP client (its server command), or serve over HTTP "
                                "with --http 127.0.0.1:PORT"))
    if not tools_dir.is_dir():
        raise UserError(Problem(tools_dir, None, "tools directory not found",
                                "pass --tools-dir DIR with the folder of tool files"))


def _checked_additions(address: tuple[str, int] | None, recipes: Path | None,
                       allow_origins: Sequence[str]) -> list[str]:
    """The ``--allow-origin`` origins as a browser sends them; UserError for a bad one or a missing ``--recipes``."""
    origins = [check_origin(origin) for origin in allow_origins]
    if origins and address is None:
        raise UserError(Problem(None, None, "--allow-origin is for browser clients, which reach the server over HTTP",
                                "add --http 127.0.0.1:PORT, or leave --allow-origin out for stdio"))
    if recipes is not None and not recipes.is_dir():
        raise UserError(Problem(recipes, None, "recipes directory not found",
                                "pass --recipes DIR with the folder of recipe files"))
    return origins


def _service_options(address: tuple[str, int] | None, metrics_listen: str | None, drain_delay: float,
                     stateless: bool) -> ServiceOptions:
    """The service options, checked: metrics on an address of their own, stateless only over HTTP."""
    if stateless and address is None:
        raise UserError(Problem(None, None, "--stateless is for a server over HTTP (stdio is one session)",
                                "add --http HOST:PORT, or leave --stateless out"))
    if drain_delay < 0:
        raise UserError(Problem(None, None, f"--drain-delay {drain_delay} is negative",
                                "give the time your balancer needs to notice /readyz, e.g. --drain-delay 5s"))
    metrics = parse_metrics_address(metrics_listen, address) if metrics_listen is not None else None
    return ServiceOptions(metrics, drain_delay, stateless)


def _session_limits(access: AccessList | None, auth: Path | InlineAuth | None, max_sessions: int | None,
                    max_client_sessions: int | None) -> SessionLimits:
    """The server's and each client's session limits, refused when one client could fill the server."""
    own_limits = [(client.name, client.max_sessions) for client in access.clients] if access else None
    try:
        return resolve_session_limits(max_sessions, max_client_sessions, own_limits)
    except ValueError as exc:
        where = auth if auth is None or isinstance(auth, Path) else auth.file
        raise UserError(Problem(where, None, str(exc), "raise --max-sessions, or lower the clients' limits")) from None


def _serve_stdio(server: CatalogService) -> None:
    from toolrun.mcp.lean_stdio import serve_lean_stdio

    asyncio.run(serve_lean_stdio(server))


def _serve_http(server: CatalogService, address: tuple[str, int], http: str | None, access: AccessList | None,
                report: Callable[[str], None], limits: HttpLimits, origins: list[str], service: ServiceOptions,
                resource_url: str | None, hangup: HeldHangup) -> None:
    import anyio

    from toolrun.mcp.http import bind, serve_http
    from toolrun.mcp.server import CatalogServer

    assert isinstance(server, CatalogServer)
    try:
        sock = bind(*address)
    except OSError as exc:
        raise UserError(Problem(None, None, f"cannot listen on {http}: {exc.strerror or exc}",
                                "pick another port, or stop what is using it")) from None
    verifier = _token_verifier(access, report)
    stop_metrics = _start_metrics(server.metrics, service, report)
    try:
        anyio.run(partial(serve_http, service=service, resource_url=resource_url, verifier=verifier, hangup=hangup),
                  server, sock,
                  access, lambda url: report(f"listening on {url}"), limits, origins)
    finally:
        stop_metrics()


def _start_metrics(metrics: GatewayMetrics, service: ServiceOptions, report: Callable[[str], None]) -> Callable[[], None]:
    """Serve ``/metrics`` on ``--metrics-listen`` (in a thread); the function that stops it."""
    if service.metrics_listen is None:
        return lambda: None
    from toolrun.mcp.metrics import serve_metrics

    host, port = service.metrics_listen
    try:
        endpoint = serve_metrics(metrics, host, port)
    except OSError as exc:
        raise UserError(Problem(None, None, f"cannot listen on --metrics-listen {host}:{port}: {exc.strerror or exc}",
                                "pick another port, or stop what is using it")) from None
    report(f"metrics on {endpoint.url}")
    return endpoint.stop


def _token_verifier(access: AccessList | None, report: Callable[[str], None]) -> TokenVerifier | None:
    """The checker of the ``oidc`` section's tokens, its keys read before the first client comes."""
    if access is None or access.oidc is None:
        return None
    from toolrun.mcp.oidc import TokenVerifier

    verifier = TokenVerifier(access.oidc)
    if verifier.keys.candidates(None):
        report(f"accepting tokens of {access.oidc.issuer} for audience {access.oidc.audience}")
    else:  # a provider down at start is not fatal: tokens are refused until it answers
        report(f"warning: no signing keys from {access.oidc.issuer} ({verifier.keys.last_error or 'it publishes none'}); "
               "its tokens are refused until it answers (asked again at most once a minute)")
    return verifier
