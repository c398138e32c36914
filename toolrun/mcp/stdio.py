"""The stdio transport over the official SDK: for the clients the lean server hands over.

``toolrun.mcp.lean_stdio`` serves stdio itself; a client it does not serve (a 2026-07-28 one,
one that opens without ``initialize``) comes here with the wire already claimed and its first
line replayed. It ends when stdin closes, once the requests read before are answered.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params

from toolrun.mcp.sdk_streams import WrappedReceiveStream, WrappedStream
from toolrun.mcp.server import CatalogServer
from toolrun.mcp.stdio_wire import EOF_GRACE_SECONDS
from toolrun.mcp.unreadable import AnsweringUnreadable


async def serve_stdio(server: CatalogServer, stdin: Any = None, stdout: Any = None) -> None:
    """Serve one client over ``stdin``/``stdout`` (the process's own when None) until it closes stdin."""
    async with stdio_server(stdin, stdout) as (read_stream, write_stream), anyio.create_task_group() as tasks:
        tasks.start_soon(server.watch)
        # A line the SDK cannot read (nested too deep, not JSON) gets an error reply instead of silence.
        received = AnsweredBeforeTheEnd(AnsweringUnreadable(read_stream, write_stream), write_stream)
        await server.server.run(received, received.replies, server.initialization_options())
        tasks.cancel_scope.cancel()


class AnsweredBeforeTheEnd(WrappedReceiveStream):
    """A receive stream of the SDK whose end waits, up to ``grace`` seconds, for the requests it delivered to
    be answered on ``replies`` (the write stream to give the SDK's server), as the lean server waits.

    At the end of its read stream the SDK's dispatcher cancels every handler still running and answers
    "Connection closed": a piped file of requests (``toolrun mcp < requests.jsonl``) ends as soon as it is
    read, so its requests (but ``initialize``, answered before the next line is read) got that error instead
    of their results. A request the client cancelled needs no answer; one still running after the grace is
    cancelled and answered "Connection closed", as the lean server does.
    """

    def __init__(self, inner: Any, write_stream: Any, grace: float = EOF_GRACE_SECONDS) -> None:
        super().__init__(inner)
        self._grace = grace
        self._unanswered: Counter[str | int] = Counter()  # by the SDK's id (7 and "7" are one), twice when sent twice
        self._changed = anyio.Event()
        self.replies = _WatchedReplies(write_stream, self)

    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except anyio.EndOfStream:
            await self._wait_for_answers()
            raise
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCRequest):
            self._unanswered[coerce_request_id(message.id)] += 1
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = cancelled_request_id_from_params(message.params)
            if cancelled is not None:
                self._settled(cancelled)
        return item

    def answered(self, request_id: Any) -> None:
        """A reply (a result or an error) with ``request_id`` went out."""
        if isinstance(request_id, (str, int)):
            self._settled(request_id)

    def _settled(self, request_id: str | int) -> None:
        key = coerce_request_id(request_id)
        left = self._unanswered[key] - 1
        if left > 0:
            self._unanswered[key] = left
        else:  # answered, or cancelled by the client and then answered all the same: nothing left to wait for
            self._unanswered.pop(key, None)
        self._changed.set()

    async def _wait_for_answers(self) -> None:
        with anyio.move_on_after(self._grace):
            while self._unanswered:
                self._changed = anyio.Event()
                await self._changed.wait()


class _WatchedReplies(WrappedStream):
    """The SDK's write stream, telling ``received`` of each reply that went out."""

    def __init__(self, inner: Any, received: AnsweredBeforeTheEnd) -> None:
        super().__init__(inner)
        self._received = received

    async def send(self, item: Any) -> None:
        await self._inner.send(item)
        message = getattr(item, "message", None)
        if isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
            self._received.answered(message.id)
