"""Time limits on what a client sends, and a bound on open connections, for the HTTP server.

uvicorn (with h11) waits for a request's headers and body as long as a client cares to drip
them, so a few thousand half-sent requests hold as many sockets, unauthenticated, until the
server runs out of file descriptors. This protocol gives each request ``header_timeout``
from the start of its connection (or the end of the previous response, on a kept-alive
connection) to finish its headers, and ``body_timeout`` from there to finish its body; past
either the connection is closed (after a 408 when a body was late and no response began). A response being
streamed (an event stream) has no deadline: the request was complete.

At ``max_connections`` open, a new connection closes the one that has waited longest for its
headers to make room; when no connection is waiting for headers, the new one is refused (503).
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolrun.mcp.limits import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS

_TIMED_OUT = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: 16\r\n"
              b"connection: close\r\n\r\nrequest too slow")
_FULL = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 20\r\n"
         b"connection: close\r\n\r\ntoo many connections")


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with header and body deadlines and a bound on connections (see the module)."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting_for: str | None = None  # "headers", "body", or None (nothing owed by the client)
        self.waiting_since = 0.0
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections and not self._make_room():
            self.connections.discard(self)
            transport.write(_FULL)
            transport.close()
            return
        self._watch()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_deadline()
        self.waiting_for = None
        super().connection_lost(exc)

    def _watch(self) -> None:
        """Start the deadline of what the client owes now: headers (a new request) or the rest of a body."""
        if self.transport.is_closing():
            self._stop_deadline()
            return
        state = self.conn.their_state
        owed = "headers" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
        if owed == self.waiting_for:
            return
        self._stop_deadline()
        self.waiting_for, self.waiting_since = owed, self.loop.time()
        if owed is not None:
            timeout = self.header_timeout if owed == "headers" else self.body_timeout
            self._deadline = self.loop.call_later(timeout, self._expire)

    def _stop_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.waiting_for == "body" and not self.cycle.response_started:
            self.transport.write(_TIMED_OUT)  # a request began: say why it ends (a silent close for headers)
        self.transport.close()

    def _make_room(self) -> bool:
        """Close the connection waiting longest for its headers; False when none is."""
        waiting = [conn for conn in self.connections
                   if conn is not self and isinstance(conn, DeadlineH11Protocol) and conn.waiting_for == "headers"]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda conn: conn.waiting_since)
        oldest.connections.discard(oldest)
        oldest._stop_deadline()
        oldest.transport.close()
        return True


def deadline_protocol(header_timeout: float, body_timeout: float, max_connections: int) -> type[DeadlineH11Protocol]:
    """The protocol class for uvicorn's ``http=`` with these limits (uvicorn builds it without arguments of ours)."""
    return type("DeadlineH11Protocol", (DeadlineH11Protocol,),
                {"header_timeout": header_timeout, "body_timeout": body_timeout, "max_connections": max_connections})
