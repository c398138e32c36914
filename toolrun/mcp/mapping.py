"""Results and approval questions in the protocol's shapes: pure functions over dicts, no SDK needed.

A listed tool's shape is ``toolrun.export.mcp_tool`` (the one ``toolrun tools show --format
mcp`` prints); a call's is here: ``content``, ``isError`` and ``structuredContent``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from toolrun.core.content import ContentBlock
from toolrun.core.json_limits import MAX_BODY_DEPTH, loads_bounded
from toolrun.core.tool import Tool
from toolrun.loop.execution import ApprovalWithheld


def call_result_to_mcp(text: str, is_error: bool, blocks: Sequence[ContentBlock] = ()) -> dict[str, Any]:
    """A call's text as a ``CallToolResult``, followed by the images, audio and resources an MCP server behind
    the tool returned (unchanged); a JSON object result also as ``structuredContent``."""
    content = [{"type": "text", "text": text}, *(block.wire for block in blocks)]
    result: dict[str, Any] = {"content": content, "isError": is_error}
    if not is_error:
        structured = json_object(text)
        if structured is not None:
            result["structuredContent"] = structured
    return result


def json_object(text: str) -> dict[str, Any] | None:
    """``text`` parsed when it is a JSON object (the only shape ``structuredContent`` may take)."""
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return None
    try:
        value = loads_bounded(stripped, MAX_BODY_DEPTH)  # a tool's output may nest thousands deep
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def approval_question(tool: Tool, arguments: dict[str, Any]) -> str:
    """What the client's user is asked before a call that needs approval."""
    shown = json.dumps(arguments, ensure_ascii=False, indent=2)
    why = "is marked destructive" if tool.annotations and tool.annotations.destructive else "asks for confirmation"
    return f"The tool {tool.name} {why}. Run it with these arguments?\n{shown}"


APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Approve this call", "default": False}},
    "required": ["approve"],
}


# How long a client's user has to answer an approval question (a 2025-11-25 session's elicitation). Bounded: a
# client gone while its question was up (killed, its laptop closed) would hold the call for good, and over HTTP
# its session, which a new session of that client may need, and a drain with them.
APPROVAL_WAIT_SECONDS = 600.0


def approval_unanswered() -> ApprovalWithheld:
    """What denies a call whose approval question nobody answered in time (its question is withdrawn)."""
    return ApprovalWithheld(f"nobody answered the approval question within {APPROVAL_WAIT_SECONDS / 60:g} minutes")


def approval_given(action: str, content: dict[str, Any] | None) -> bool:
    """An elicitation's answer as a yes or no: accepted with ``approve`` true."""
    return action == "accept" and bool((content or {}).get("approve"))
