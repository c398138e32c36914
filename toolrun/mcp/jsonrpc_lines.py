"""One line of newline-delimited JSON-RPC 2.0, read as the MCP SDK reads it: no SDK needed.

``read_line`` parses a line a client sent into a message (request, notification or
response), an error reply for a line that cannot be read — "Parse error" with a null id for
a line that is not JSON, "Invalid Request" with the request's id for one nested deeper than
the SDK's parser allows — or neither: a line that is JSON but no JSON-RPC message, which
the SDK drops without a reply (as it drops a blank line, and a notification it cannot read).
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from toolrun.core.json_limits import MAX_BODY_DEPTH, TooDeep, loads_bounded, nesting_depth

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SDK_PARSE_DEPTH = 201  # the SDK's JSON parser refuses a message nested deeper (a request with a 199-deep argument)
TOO_DEEP = "Invalid Request: the message nests too deeply to be read (tool arguments have a few levels)"


@dataclass(frozen=True)
class Message:
    """A JSON-RPC message: a request has ``method`` and ``request_id``, a notification ``method`` only,
    a response ``request_id`` and ``result`` or ``error``."""

    method: str | None
    request_id: str | int | None
    params: dict[str, Any] | None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def is_request(self) -> bool:
        return self.method is not None and self.request_id is not None


def read_line(line: str) -> tuple[Message | None, dict[str, Any] | None]:
    """(the message, or None) and (the error to answer with, or None) of one line."""
    if not line.strip():
        return None, None  # a blank line (a keep-alive): ignored, as the SDK always did
    try:
        value = loads_bounded(line, MAX_BODY_DEPTH * 3)  # deeper than the SDK's parser, shallower than Python's
    except ValueError:  # not JSON, or nested past that bound
        return None, unreadable_error(line)
    if nesting_depth(value) > SDK_PARSE_DEPTH:
        return None, _too_deep(value.get("id") if isinstance(value, dict) else None)
    return message_of(value), None


def unreadable_error(line: str) -> dict[str, Any] | None:
    """The reply to a line that cannot be read: "Parse error" with a null id when it is not JSON, else
    "Invalid Request" with its id (it nests too deeply); None for a notification, never answered."""
    try:
        value = loads_bounded(line, MAX_BODY_DEPTH * 3)
    except TooDeep:
        value = None
    except ValueError:  # not JSON at all: nobody can tell which request it was
        return error_reply(None, PARSE_ERROR, "Parse error: the line is not JSON")
    return _too_deep(value.get("id") if isinstance(value, dict) else _top_level_id(line))


def message_of(value: Any) -> Message | None:
    """``value`` as a JSON-RPC message; None when it is none (the SDK drops it unanswered)."""
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        return None
    request_id = value.get("id")
    params = value.get("params")
    if params is not None and not isinstance(params, dict):
        return None
    method = value.get("method")
    if isinstance(method, str):
        if "id" not in value:
            return Message(method, None, params)
        return Message(method, request_id, params) if _is_id(request_id) else None
    result, error = value.get("result"), value.get("error")
    if isinstance(result, dict) and _is_id(request_id):
        return Message(None, request_id, None, result=result)
    if isinstance(error, dict) and (request_id is None or _is_id(request_id)):
        return Message(None, request_id, None, error=error)
    return None


def error_reply(request_id: str | int | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _is_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _too_deep(request_id: Any) -> dict[str, Any] | None:
    if not _is_id(request_id):
        return None  # a notification (no id) is never answered
    return error_reply(request_id, INVALID_REQUEST, TOO_DEEP)


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


def encode(message: dict[str, Any]) -> bytes:
    """One message as one line of UTF-8 (a lone surrogate a tool printed travels as its ``\\u`` escape).

    Strict JSON: a NaN or an infinity a tool returned is ``null``, as the SDK writes it (``NaN`` on the
    wire is a line a JavaScript client cannot parse)."""
    try:
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        message = _finite(message)
        text = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode("ascii")


def _finite(value: Any) -> Any:
    """``value`` with every NaN and infinity replaced by None (results are JSON-shaped: no cycles)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value
