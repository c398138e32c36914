"""The catalog's tools in a provider's exact shape, or as MCP tools: ``toolrun tools show/export``.

Each provider adapter owns its tool shape (``Provider.tool_definition``, the function its
own request builder uses), so what is printed here is exactly what a run sends; this module
only asks the adapter and collects what a schema conversion changed. The MCP shape is no
provider's: it lives here.

Strict mode is opt-in (``strict=True``, openai and openai-responses): optional parameters
become required-and-nullable, so the model then sends ``null`` for "not given".
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toolrun.catalog.model import Catalog
from toolrun.core.tool import Tool
from toolrun.providers import get_provider_class

PROVIDER_FORMATS = ("openai", "openai-responses", "anthropic", "gemini")  # providers whose shape is exported
FORMATS = (*PROVIDER_FORMATS, "mcp")


@dataclass
class ExportedTool:
    """One tool in one provider's shape, and what the export changed to get there."""

    definition: dict[str, Any]
    changes: list[str] = field(default_factory=list)
    name: str = ""


def _check_format(format: str) -> None:
    if format not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; use one of {', '.join(FORMATS)}")


def mcp_tool(tool: Tool) -> dict[str, Any]:
    """A Tool of the MCP schema (tools/list); hints only where the author gave them."""
    annotations = tool.annotations
    definition: dict[str, Any] = {"name": tool.name}
    if annotations and annotations.title:
        definition["title"] = annotations.title
    definition["description"] = tool.description
    definition["inputSchema"] = copy.deepcopy(tool.parameters)
    if annotations:
        hints = {
            "readOnlyHint": annotations.read_only,
            "destructiveHint": annotations.destructive,
            "idempotentHint": annotations.idempotent,
            "openWorldHint": annotations.open_world,
        }
        given: dict[str, Any] = {key: value for key, value in hints.items() if value is not None}
        if annotations.title:
            given["title"] = annotations.title
        if given:
            definition["annotations"] = given
    return definition


def export_tool(tool: Tool, format: str, *, strict: bool = False) -> ExportedTool:
    """``tool`` as ``format`` expects it. ``strict`` applies to openai / openai-responses."""
    _check_format(format)
    if format == "mcp":
        return ExportedTool(mcp_tool(tool), [], tool.name)
    wire = get_provider_class(format).tool_definition(tool.definition(), strict=strict)
    return ExportedTool(wire.definition, wire.changes, tool.name)


def export_catalog(catalog: Catalog | Iterable[Tool], format: str, *, strict: bool = False) -> list[ExportedTool]:
    """Every tool of ``catalog`` in ``format``, in catalog order."""
    return [export_tool(tool, format, strict=strict) for tool in catalog]


def tools_payload(definitions: list[dict[str, Any]], format: str) -> Any:
    """The whole ``tools`` value for ``format``: the provider's own (gemini: its declarations), or MCP's ListToolsResult."""
    _check_format(format)
    if format == "mcp":
        return {"tools": definitions}
    return get_provider_class(format).tools_value(definitions)
