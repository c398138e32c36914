"""A server's ``tools/list``, read tool by tool: a tool the protocol's types reject costs only itself.

The SDK's ``list_tools`` validates a page as a whole: one tool without an ``inputSchema``, or
with one that is not a ``type: object`` schema, fails the page — every tool of the server is
lost, and the error is a pydantic dump. Here each page is asked for unvalidated, and its
envelope and each of its tools are validated apart, against the types the SDK itself checks
for the negotiated protocol version; a tool that fails them is a ``RejectedTool`` with what is
wrong in one line. Pages are followed by ``nextCursor`` (a cursor that comes back, or more than
``MAX_TOOL_PAGES``, ends the listing with an error).

The tools accepted are handed to the session as a complete listing of its own, as the SDK's
``list_tools`` does: a ``tools/call`` result is checked against its tool's output schema, and a
session that does not know the tool lists the whole server first — which the rejected tool
would fail. The SDK has no public way to do either, so three of ``ClientSession``'s private
names are used (mcp 2.x): ``_stamp`` and ``_dispatcher`` (``send_request`` without its
validation of the whole result) and ``_absorb_tool_listing``. Where they are missing, or are of
another shape (a ``TypeError`` or ``AttributeError`` using them), the SDK's own ``list_tools`` reads
the pages (one bad tool fails the listing, as it did before).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from toolrun.backends.mcp_errors import validation_summary

MAX_TOOL_PAGES = 1000  # a server whose cursors never end cannot hang a load
_SESSION_INTERNALS = ("_stamp", "_dispatcher", "_absorb_tool_listing")


@dataclass(frozen=True)
class RejectedTool:
    """A tool of the server's list that the protocol's types reject: its name ("" if it has none) and why."""

    name: str
    reason: str


@dataclass
class ToolList:
    """What the server listed, in its order: the SDK's ``Tool`` of each entry it accepts, a ``RejectedTool`` of the others."""

    entries: list[Any]

    @property
    def tools(self) -> list[Any]:
        """The SDK's ``Tool``s of the entries it accepts."""
        return [entry for entry in self.entries if not isinstance(entry, RejectedTool)]


async def list_every_tool(session: Any) -> ToolList:
    """Every tool of the server on ``session`` (an entered ``ClientSession``), page by page."""
    if not all(hasattr(session, name) for name in _SESSION_INTERNALS):
        return ToolList(await _pages_validated_whole(session))
    try:
        return await _listed_tool_by_tool(session)
    except (TypeError, AttributeError):  # the private names of another shape (a later SDK): as where they are missing
        return ToolList(await _pages_validated_whole(session))


async def _listed_tool_by_tool(session: Any) -> ToolList:
    import mcp_types

    listing = ToolList([])
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_TOOL_PAGES):
        raw = await _unvalidated_request(session, mcp_types.ListToolsRequest(
            params=mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None))
        cursor = _read_page(raw, session.protocol_version or "2025-11-25", listing)
        if not cursor:
            session._absorb_tool_listing(mcp_types.ListToolsResult(tools=listing.tools), complete=True)
            return listing
        _check_cursor(cursor, seen)
    raise ValueError(f"its tools/list did not end within {MAX_TOOL_PAGES} pages")


async def _unvalidated_request(session: Any, request: Any) -> dict[str, Any]:
    """``session.send_request`` up to the answer's raw result: stamped alike, not validated."""
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    options: dict[str, Any] = {}
    session._stamp(data, options)
    result = await session._dispatcher.send_raw_request(data["method"], data.get("params"), options)
    if not isinstance(result, dict):  # not the raw JSON result send_request validates: the SDK's list_tools says what is wrong
        raise TypeError(f"the session's dispatcher answered a {type(result).__name__}, not the raw result")
    return result


def _read_page(raw: dict[str, Any], version: str, listing: ToolList) -> str | None:
    """Add one page's tools to ``listing``; its ``nextCursor``. A page whose envelope is wrong (``tools``
    not a list, a cursor not a string) raises pydantic's ``ValidationError``, as the SDK would."""
    import mcp_types
    from mcp_types.methods import validate_server_result

    entries = raw.get("tools")
    envelope: dict[str, Any] = {key: raw[key] for key in ("nextCursor", "_meta") if key in raw}
    envelope["tools"] = [] if isinstance(entries, list) else entries  # its tools are validated one by one
    validate_server_result("tools/list", version, envelope)
    page = mcp_types.ListToolsResult.model_validate(envelope, by_name=False)
    for entry in entries if isinstance(entries, list) else []:
        tool, reason = _read_tool(entry, version)
        if tool is None:
            name = entry.get("name") if isinstance(entry, dict) else None
            tool = RejectedTool(name if isinstance(name, str) else "", reason)
        listing.entries.append(tool)
    return page.next_cursor


def _read_tool(entry: Any, version: str) -> tuple[Any, str]:
    """The SDK's ``Tool`` of one entry of the list, or None and what is wrong with it (one line)."""
    import mcp_types
    from mcp_types.methods import validate_server_result
    from pydantic import ValidationError

    alone = {"tools": [entry]}
    try:
        validate_server_result("tools/list", version, alone)
        return mcp_types.ListToolsResult.model_validate(alone, by_name=False).tools[0], ""
    except ValidationError as exc:
        return None, validation_summary(exc, skip=2) or "not a tool"  # its location is ("tools", 0, ...)


def _check_cursor(cursor: str, seen: set[str]) -> None:
    if cursor in seen:
        raise ValueError(f"its tools/list gave the cursor {cursor[:40]!r} twice (a paging loop)")
    seen.add(cursor)


async def _pages_validated_whole(session: Any) -> list[Any]:
    """Every tool, through the SDK's ``list_tools`` (whose ``ValidationError`` fails the whole page)."""
    import mcp_types

    tools: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_TOOL_PAGES):
        page = await session.list_tools(params=mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools
        _check_cursor(cursor, seen)
    raise ValueError(f"its tools/list did not end within {MAX_TOOL_PAGES} pages")
