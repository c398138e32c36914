"""An HTTP error response as the model reads it: what the API said first, then the body.

An API's JSON error names the mistake in a few fields (``message``, ``detail``, ``error``,
``errors[]``); a cut of the raw body often loses them behind a documentation URL or a
stack of metadata. So those fields come first, then an excerpt of the body, all within
the tool's ``error_excerpt`` characters.
"""

from __future__ import annotations

import json
from typing import Any

from toolrun.core.text import excerpt

DEFAULT_ERROR_EXCERPT = 2000  # characters of an error body the model sees (a validation error's list fits)
_FIELDS = ("message", "detail", "error", "errors")  # in this order: the usual one-line reason, then the details
_ITEM_TEXT = ("message", "msg", "detail", "description", "title", "code")  # what one entry of errors[] says
_ITEM_WHERE = ("field", "loc", "path", "pointer", "param", "parameter", "property", "source", "resource")
_MAX_ITEMS = 20
_BODY = " | body: "


def status_line(response: Any) -> str:
    """``HTTP 500 Internal Server Error`` for an HTTP client's response (httpx's, or the MCP SDK's copy of it)."""
    return f"HTTP {response.status_code} {getattr(response, 'reason_phrase', '') or ''}".rstrip()


def error_text(status: str, body: str, limit: int = DEFAULT_ERROR_EXCERPT) -> str:
    """``HTTP 422 Unprocessable Entity: Validation Failed; title: missing_field | body: {...}`` within ``limit``."""
    said = summary(body)
    if not said:
        return f"{status}: {excerpt(body, limit, flatten=True, empty='(empty body)')}"
    said = excerpt(said, limit)
    room = limit - len(said) - len(_BODY)
    rest = f"{_BODY}{excerpt(body, room, flatten=True)}" if room > 40 else ""
    return f"{status}: {said}{rest}"


def summary(body: str) -> str:
    """The ``message``, ``detail``, ``error`` and ``errors[]`` of a JSON error body, in that order ("" if none)."""
    try:
        document = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(document, dict):
        return ""
    parts = [text for key in _FIELDS if key in document and (text := _said(document[key]))]
    return "; ".join(dict.fromkeys(parts))


def _said(value: Any, depth: int = 0) -> str:
    """One field's words: a string as is, an object by its own message fields, a list entry by entry."""
    if value is None or value == "" or depth > 3:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        entries = [text for item in value[:_MAX_ITEMS] if (text := _said(item, depth + 1))]
        more = f"; … {len(value) - _MAX_ITEMS} more" if len(value) > _MAX_ITEMS else ""
        return "; ".join(entries) + more
    if isinstance(value, dict):
        return _entry(value, depth)
    return json.dumps(value)


def _entry(item: dict[str, Any], depth: int) -> str:
    """``title: missing_field`` from GitHub's ``{"field": "title", "code": "missing_field"}``, FastAPI's
    ``{"loc": ["query", "since"], "msg": ...}``; an entry naming neither: its compact JSON."""
    text = next((said for key in _ITEM_TEXT if key in item and (said := _said(item[key], depth + 1))), "")
    where = next((item[key] for key in _ITEM_WHERE if item.get(key) not in (None, "", [])), None)
    if isinstance(where, list):
        where = ".".join(str(part) for part in where)
    elif isinstance(where, dict):
        where = next((str(v) for v in where.values() if isinstance(v, str)), None)
    if not text:
        return json.dumps(item, ensure_ascii=False, separators=(",", ":"), default=str)
    return f"{where}: {text}" if where else text
