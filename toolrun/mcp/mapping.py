"""Our tools and results in the protocol's shapes: pure functions over dicts, no SDK needed.

The wire names are the protocol's (``inputSchema``, ``readOnlyHint``, ``isError``,
``structuredContent``); the SDK serialises these dicts as they are.
"""

from __future__ import annotations

import json
from typing import Any

from toolrun.tool import Tool

_HINTS = {"read_only": "readOnlyHint", "destructive": "destructiveHint",
          "idempotent": "idempotentHint", "open_world": "openWorldHint"}


def tool_to_mcp(tool: Tool) -> dict[str, Any]:
    """A ``Tool`` as listed by ``tools/list``: name, title, description, inputSchema, annotations."""
    listed: dict[str, Any] = {"name": tool.name, "description": tool.description, "inputSchema": tool.parameters}
    annotations = tool.annotations
    if annotations is not None:
        hints: dict[str, Any] = {wire: getattr(annotations, ours) for ours, wire in _HINTS.items()
                                 if getattr(annotations, ours) is not None}
        if annotations.title:
            listed["title"] = annotations.title
            hints["title"] = annotations.title
        if hints:
            listed["annotations"] = hints
    return listed


def call_result_to_mcp(text: str, is_error: bool) -> dict[str, Any]:
    """A call's text as a ``CallToolResult``; a JSON object result also as ``structuredContent``."""
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
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
        value = json.loads(stripped)
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


def approval_given(action: str, content: dict[str, Any] | None) -> bool:
    """An elicitation's answer as a yes or no: accepted with ``approve`` true."""
    return action == "accept" and bool((content or {}).get("approve"))
