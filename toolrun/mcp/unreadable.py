"""Lines a client sends that the SDK cannot read, answered instead of dropped.

The SDK's stdio transport hands the server an exception for a line that is not JSON-RPC,
and the server drops it: a client that sent a request nested deeper than the JSON parser
allows (about 200 levels) waits for an answer that never comes. This wrapper answers
such a request with the JSON-RPC error it asks for — "Invalid Request" with the request's
id, or "Parse error" with a null id for a line that is not JSON at all — and lets
everything else through unchanged (a blank line, a notification: no reply, as before).
"""

from __future__ import annotations

import json
import re
from types import TracebackType
from typing import Any

import mcp_types as types
from mcp.shared.message import SessionMessage

from toolrun.core.json_limits import MAX_BODY_DEPTH, TooDeep, loads_bounded


class AnsweringUnreadable:
    """A receive stream of the SDK that answers the unreadable lines among its items on ``write_stream``."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self._inner = inner
        self._write = write_stream

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK's context streams keep it)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        while True:
            item = await self._inner.receive()
            reply = unreadable_reply(item) if isinstance(item, Exception) else None
            if reply is None:
                return item
            await self._write.send(reply)

    def __aiter__(self) -> AnsweringUnreadable:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> AnsweringUnreadable:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.aclose()


def unreadable_reply(error: Exception) -> SessionMessage | None:
    """The JSON-RPC error answering the line ``error`` is about; None when it is not a line that failed to parse."""
    line = _failed_line(error)
    if line is None or not line.strip():
        return None  # a blank line (a keep-alive): ignored, as the SDK always did
    try:
        message = loads_bounded(line, MAX_BODY_DEPTH * 3)  # deeper than the SDK's parser, shallower than Python's
    except TooDeep:
        message = None
    except ValueError:  # not JSON at all: nobody can tell which request it was
        return _error(None, types.PARSE_ERROR, "Parse error: the line is not JSON")
    request_id = message.get("id") if isinstance(message, dict) else _top_level_id(line)
    if not isinstance(request_id, (str, int)) or isinstance(request_id, bool):
        return None  # a notification (no id) is never answered; the SDK drops it, as before
    return _error(request_id, types.INVALID_REQUEST,
                  "Invalid Request: the message nests too deeply to be read (tool arguments have a few levels)")


_ID_VALUE = re.compile(r'\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def _top_level_id(line: str) -> Any:
    """The ``id`` member of the outermost object of ``line``, found without parsing its nested values."""
    depth, index, length = 0, 0, len(line)
    while index < length:
        char = line[index]
        if char == '"':
            end = index + 1
            while end < length and line[end] != '"':
                end += 2 if line[end] == "\\" else 1
            if depth == 1 and line[index:end + 1] == '"id"':
                found = _ID_VALUE.match(line, end + 1)
                if found:
                    return json.loads(found.group(1))
            index = end + 1
            continue
        if char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        index += 1
    return None


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


def _error(request_id: str | int | None, code: int, message: str) -> SessionMessage:
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)))


__all__ = ["AnsweringUnreadable", "unreadable_reply"]
