"""What went wrong in the MCP client, in one line: the text of a load problem or of a call's error result.

The SDK validates every answer of a server with pydantic, whose error is a dump of many lines
(each error's location, message, input and an errors.pydantic.dev link) — as an exception, or
pasted into the message of an ``MCPError`` (the streamable HTTP client's "Failed to parse JSON
response: …"). A user reading a load problem, or a model reading a call's result, gets the
first error's location and message instead, and how many more there were.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from toolrun.backends.http_errors import status_line
from toolrun.core.credentials import without_login

# pydantic's str(ValidationError): "N validation error(s) for Model", then per error its location
# (none for an error of the whole input, such as "Invalid JSON") and an indented "message [type=...,
# input_value=..., input_type=...]", then a "For further information visit https://errors.pydantic.dev/..." line.
_PYDANTIC_DUMP = re.compile(r"(\d+) validation errors? for [^\n]*\n(?:(\S[^\n]*)\n)?[ \t]+([^\n]*?)[ \t]*(?:\[type=([\w.]+)[^\n]*)?"
                            r"(?:\n[ \t]+For further information visit \S+)?(?:\n.*)?$", re.DOTALL)
_PYDANTIC_LINK = re.compile(r"\n?[ \t]*For further information visit https://errors\.pydantic\.dev\S*")

_JSON_KINDS = {"dict_type": "an object", "model_type": "an object", "model_attributes_type": "an object",
               "list_type": "an array", "string_type": "a string", "bool_type": "true or false",
               "int_type": "an integer", "float_type": "a number"}


def innermost(exc: BaseException) -> BaseException:
    """The failure an exception group wraps (anyio task groups wrap the real one), else ``exc``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """``exc`` in one line: ``Type: text`` (the innermost of an exception group), a pydantic error summarized."""
    exc = innermost(exc)
    refused = http_refusal(exc)
    if refused is not None:
        return refused
    summary = validation_summary(exc)
    text = summary if summary is not None else one_line(str(exc)) or type(exc).__name__
    return text if type(exc).__name__ in text else f"{type(exc).__name__}: {text}"


def http_refusal(exc: BaseException) -> str | None:
    """An HTTP client's error for a response it refused (``raise_for_status``) as ``HTTP 500 Internal Server
    Error (POST http://host/messages/)``: the URL without its query (a legacy SSE server's session id) or login;
    None for any other exception."""
    response = getattr(exc, "response", None)
    status = getattr(response, "status_code", None)
    if not isinstance(status, int):
        return None
    said = status_line(response)
    request = getattr(exc, "request", None)
    if request is None or not str(getattr(request, "url", "")):
        return said
    parts = urlsplit(without_login(str(request.url)))
    return f"{said} ({request.method} {urlunsplit(parts._replace(query='', fragment=''))})"


def validation_summary(exc: BaseException, skip: int = 0) -> str | None:
    """A pydantic ``ValidationError`` as ``location: message``, its location without its first ``skip``
    steps; None for any other exception."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError) or not exc.errors():
        return None
    errors = exc.errors(include_url=False)
    first = errors[0]
    return _summary(".".join(str(step) for step in first["loc"][skip:]), str(first["msg"]), first["type"],
                    first.get("input"), len(errors))


def one_line(text: str) -> str:
    """``text`` with a pydantic error dump in it reduced to its first error, and no errors.pydantic.dev links."""
    match = _PYDANTIC_DUMP.search(text)
    if match is None:
        return _PYDANTIC_LINK.sub("", text).strip()
    count, where, message, kind = match.groups()
    return text[:match.start()] + _summary((where or "").strip(), message, kind or "", None, int(count))


def _summary(where: str, message: str, kind: str, value: Any, count: int) -> str:
    more = f" (and {count - 1} more)" if count > 1 else ""
    if kind == "missing":
        return f"{where or 'a required field'} is missing{more}"
    if kind in _JSON_KINDS:
        message = f"should be {_JSON_KINDS[kind]}"
    message = message.removeprefix("Input ")
    got = _scalar(value)
    message += f", got {got}" if got else ""
    return f"{where}: {message}{more}" if where else message + more


def _scalar(value: Any, limit: int = 40) -> str:
    """A short JSON text of a scalar the server sent, or "" (an object or array is not repeated, nor a longer text:
    cut short, a secret in it would no longer be the value the caller redacts)."""
    if value is None or isinstance(value, (dict, list, tuple)):
        return ""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return ""
    return text if len(text) <= limit else ""
