"""What the SDK's client transports log about toolrun's MCP connections, and what toolrun makes of it.

The SDK logs a server's unreadable message or a broken stream or POST with its traceback (on stderr
when nothing is configured). For toolrun's own connections those records are kept off stderr: the
connection keeps the first in one line for its error message, and a legacy HTTP+SSE session whose
sending or reading task ended fails the calls waiting on it at once. Records of any other SDK
client in the process are left alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from contextvars import ContextVar
from typing import Any, Protocol

from toolrun.backends.mcp_errors import describe
from toolrun.core.secrets import Redactor


class LoggedConnection(Protocol):
    """What the filter reads and writes of a connection (``toolrun.backends.mcp_server._Connection``)."""

    secrets: tuple[str, ...]
    transport_error: str | None
    transport_ending: str | None
    transport_ended: asyncio.Event
    legacy_sse: bool


# The connection of the task running: set by the task holding the session (the SDK's tasks inherit it) and
# by each request's sender (the SDK's HTTP clients read an answer in the context of the task that sent it).
CURRENT_CONNECTION: ContextVar[LoggedConnection | None] = ContextVar("toolrun_mcp_connection", default=None)

# What the SDK's legacy HTTP+SSE client logs as its reading or sending task ends: the session can no longer
# send a request or receive an answer, and every call waiting on it would wait out its timeout.
_POST_WRITER_ENDED = "Error in post_writer"
_LEGACY_SSE_ENDINGS = frozenset({_POST_WRITER_ENDED, "Error in sse_reader", "Encountered SSE exception"})
_SDK_TRANSPORT_LOGGERS = ("mcp.client.stdio", "mcp.client.streamable_http", "mcp.client.sse")


class _ReportedByTheConnection(logging.Filter):
    """Drops a record with an exception logged for one of toolrun's connections, keeping it in one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        connection = CURRENT_CONNECTION.get()
        if record.exc_info is None or connection is None:
            return True
        failure = record.exc_info[1]
        said = f"{record.getMessage()}: {describe(failure)}" if failure is not None else record.getMessage()
        said = first_line(Redactor(connection.secrets).redact(said))  # redacted, then cut
        if connection.transport_error is None:
            connection.transport_error = said
        if record.name == "mcp.client.sse" and record.getMessage() in _LEGACY_SSE_ENDINGS:
            if connection.transport_ending is None:  # its own reason, not an earlier record's
                connection.transport_ending = said
            connection.transport_ended.set()  # logged on the hub's loop, by the SDK's task that just ended
        return False


for _name in _SDK_TRANSPORT_LOGGERS:
    logging.getLogger(_name).addFilter(_ReportedByTheConnection())


class TransportEnded(Exception):
    """The session's legacy SSE transport ended while a call waited (its ``transport_error`` says why)."""


async def unless_transport_ends(connection: LoggedConnection, request: Coroutine[Any, Any, Any]) -> Any:
    """``request``'s answer; ``TransportEnded`` (the request cancelled) as soon as the legacy SSE client stops
    sending or reading: no answer can come then. Other transports answer a failed request themselves."""
    if not connection.legacy_sse:
        return await request
    answer = asyncio.ensure_future(request)
    ended = asyncio.ensure_future(connection.transport_ended.wait())
    try:
        await asyncio.wait((answer, ended), return_when=asyncio.FIRST_COMPLETED)
    finally:
        ended.cancel()
        if not answer.done():
            answer.cancel()
    if answer.done() and not answer.cancelled():
        return answer.result()
    raise TransportEnded


def transport_ended_text(ending: str | None) -> str:
    """What befell a call whose legacy SSE transport ended under it (``ending``: the record that ended it). Only a
    failed POST leaves the call unsent; once the stream of answers breaks, the server may well have run it."""
    if ending is not None and ending.startswith(_POST_WRITER_ENDED):
        return "could not be sent the call"
    return "lost its stream of answers during the call: the call may have run, its answer is lost"


def first_line(text: str, limit: int = 200) -> str:
    """The first line of ``text``, cut at ``limit`` characters."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit] + "…"
