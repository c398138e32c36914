"""The SDK's streamable HTTP session manager, with sessions bound to who opened them and limited per client.

A request naming a session another identity opened is answered 404, exactly as an unknown
session is (its existence is not confirmed). A request opening a session over a limit is
answered 429 with a JSON-RPC error saying which limit (``limits``). The SDK's own
session limit is off: the ledger here counts every session the SDK admits and forgets it
when the SDK discards it (a DELETE, the idle timeout, a crash).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import mcp_types as types
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER, StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from toolrun.mcp.limits import SessionLedger, SessionLimits, SessionRefused
from toolrun.mcp.server import CALLER_SCOPE_KEY, Caller

_OPENER: ContextVar[Caller | None] = ContextVar("toolrun_mcp_session_opener", default=None)
TOO_MANY_SESSIONS_CODE = -32000  # JSON-RPC's range for errors a server defines


def jsonrpc_error_response(status: int, code: int, message: str) -> Response:
    """An HTTP error whose body is a JSON-RPC error without a request id (the SDK's own shape)."""
    body = types.JSONRPCError(jsonrpc="2.0", id=None, error=types.ErrorData(code=code, message=message))
    return Response(body.model_dump_json(by_alias=True, exclude_unset=True), status_code=status,
                    media_type="application/json")


def _caller(scope: Scope) -> Caller:
    found = scope.get(CALLER_SCOPE_KEY)
    return found if isinstance(found, Caller) else Caller()


def _session_id(scope: Scope) -> str | None:
    wanted = MCP_SESSION_ID_HEADER.lower().encode("latin-1")
    return next((value.decode("latin-1") for key, value in scope.get("headers", []) if key.lower() == wanted), None)


class BoundSessionManager(StreamableHTTPSessionManager):
    """Sessions owned by the identity that opened them, and at most ``limits`` of them open."""

    def __init__(self, app: Any, *, limits: SessionLimits, **options: Any) -> None:
        super().__init__(app, max_sessions=None, **options)
        self.ledger = SessionLedger(limits)

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = _caller(scope)
        session_id = _session_id(scope)
        if session_id is not None:
            if not self.ledger.belongs_to(session_id, caller.identity):
                # The same answer as for a session that does not exist: its existence is not confirmed.
                await jsonrpc_error_response(404, types.INVALID_REQUEST, "Session not found")(scope, receive, send)
                return
            self.ledger.begin(session_id)
            try:
                await super()._handle_stateful_request(scope, receive, send)
            finally:
                self.ledger.end(session_id)
            return
        opener = _OPENER.set(caller)
        try:
            await super()._handle_stateful_request(scope, receive, send)
        except SessionRefused as refusal:
            await jsonrpc_error_response(429, TOO_MANY_SESSIONS_CODE, refusal.message)(scope, receive, send)
        finally:
            _OPENER.reset(opener)

    def _admit_session(self, requestor: Any) -> StreamableHTTPServerTransport | None:
        # Runs under the SDK's session-creation lock: the count and the admission cannot interleave.
        caller = _OPENER.get() or Caller()
        label = f"client {caller.name!r}" if caller.name else "this client"
        idle = self.ledger.make_room(caller.identity, caller.max_sessions, label)
        if idle is not None:
            self._close(idle)
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            self.ledger.opened(transport.mcp_session_id, caller.identity)
        return transport

    def _close(self, session_id: str) -> None:
        """Forget an idle session now (its id answers 404 at once) and end it in the background."""
        self.ledger.forget(session_id)
        transport = self._server_instances.pop(session_id, None)
        self._session_owners.pop(session_id, None)
        if transport is not None and self._task_group is not None:
            self._task_group.start_soon(self._discard_session, session_id, transport)

    async def _serve_opening_request(self, http_transport: StreamableHTTPServerTransport, scope: Scope,
                                     receive: Receive, send: Send) -> None:
        try:
            await super()._serve_opening_request(http_transport, scope, receive, send)
        finally:
            if http_transport.mcp_session_id is not None:
                self.ledger.end(http_transport.mcp_session_id)

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self.ledger.forget(session_id)
        await super()._discard_session(session_id, transport)
