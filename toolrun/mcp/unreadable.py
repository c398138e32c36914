"""Lines a client sends that the SDK cannot read, answered instead of dropped.

The SDK's stdio transport hands the server an exception for a line that is not JSON-RPC,
and the server drops it: a client that sent a request nested deeper than the JSON parser
allows (about 200 levels) waits for an answer that never comes. This wrapper answers
such a request with the JSON-RPC error it asks for — "Invalid Request" with the request's
id, or "Parse error" with a null id for a line that is not JSON at all — and lets
everything else through unchanged (a blank line, a notification: no reply, as before).
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage

from toolrun.mcp.jsonrpc_lines import unreadable_error
from toolrun.mcp.sdk_streams import WrappedReceiveStream


class AnsweringUnreadable(WrappedReceiveStream):
    """A receive stream of the SDK that answers the unreadable lines among its items on ``write_stream``."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        super().__init__(inner)
        self._write = write_stream

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            reply = unreadable_reply(item) if isinstance(item, Exception) else None
            if reply is None:
                return item
            await self._write.send(reply)


def unreadable_reply(error: Exception) -> SessionMessage | None:
    """The JSON-RPC error answering the line ``error`` is about; None when it is not a line that failed to parse."""
    line = _failed_line(error)
    if line is None or not line.strip():
        return None  # a blank line (a keep-alive): ignored, as the SDK always did
    reply = unreadable_error(line)  # None for a notification: the SDK drops it, as before
    return SessionMessage(types.JSONRPCError.model_validate(reply)) if reply is not None else None


def _failed_line(error: Exception) -> str | None:
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return None
    try:
        details = errors()
    except Exception:
        return None
    for detail in details:
        if isinstance(detail, dict) and detail.get("type") == "json_invalid" and isinstance(detail.get("input"), str):
            return str(detail["input"])
    return None


__all__ = ["AnsweringUnreadable", "unreadable_reply"]
