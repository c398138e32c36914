"""Tool definitions in each provider's exact shape, converted where a provider needs it.

The one place where a neutral ``ToolDefinition`` becomes a provider's ``tools`` entry: the
provider adapters call ``tool_definition_for``; ``toolrun tools show/export`` call
``export_tool`` / ``export_catalog``, which also say what a conversion changed.

Strict mode is opt-in (``strict=True``): it makes optional parameters required-and-nullable,
so the model then sends ``null`` for "not given"; ``strip_strict_nulls`` undoes that before
the arguments are validated against the tool's own schema.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toolrun.catalog.model import Catalog
from toolrun.catalog.schema_convert import ConvertedSchema, to_gemini, to_openai_strict
from toolrun.messages import ToolDefinition
from toolrun.tool import Annotations, Tool

FORMATS = ("openai", "openai-responses", "anthropic", "gemini", "mcp")


@dataclass
class ExportedTool:
    """One tool in one provider's shape, and what the export changed to get there."""

    definition: dict[str, Any]
    changes: list[str] = field(default_factory=list)
    name: str = ""


def _check_format(format: str) -> None:
    if format not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; use one of {', '.join(FORMATS)}")


def _strict_parameters(parameters: dict[str, Any], changes: list[str]) -> tuple[dict[str, Any], bool]:
    """(parameters for strict mode, True) or (the original, False) when they cannot be strict."""
    converted: ConvertedSchema = to_openai_strict(parameters)
    if not converted.compatible:
        reasons = "; ".join(str(change) for change in converted.incompatible)
        changes.append(f"strict: false — the schema cannot be made strict ({reasons})")
        return copy.deepcopy(parameters), False
    changes.extend(f"strict mode: {change}" for change in converted.changes)
    assert converted.schema is not None
    return converted.schema, True


def _definition(
    name: str,
    description: str,
    parameters: dict[str, Any],
    format: str,
    *,
    strict: bool,
    annotations: Annotations | None,
    changes: list[str],
) -> dict[str, Any]:
    _check_format(format)
    if format == "openai":
        function: dict[str, Any] = {"name": name, "description": description}
        if strict:
            function["parameters"], function["strict"] = _strict_parameters(parameters, changes)
        else:
            function["parameters"] = copy.deepcopy(parameters)
        return {"type": "function", "function": function}
    if format == "openai-responses":
        # Responses treats a missing `strict` as true, so it is always written out.
        if strict:
            schema, is_strict = _strict_parameters(parameters, changes)
        else:
            schema, is_strict = copy.deepcopy(parameters), False
        return {"type": "function", "name": name, "description": description, "parameters": schema, "strict": is_strict}
    if format == "anthropic":
        return {"name": name, "description": description, "input_schema": copy.deepcopy(parameters)}
    if format == "gemini":
        converted = to_gemini(parameters)
        changes.extend(f"gemini: {change}" for change in converted.changes)
        declaration: dict[str, Any] = {"name": name, "description": description}
        if converted.schema is not None:
            declaration["parameters"] = converted.schema
        return declaration
    # mcp: a Tool of the MCP schema (tools/list); hints only where the author gave them.
    tool: dict[str, Any] = {"name": name}
    if annotations and annotations.title:
        tool["title"] = annotations.title
    tool["description"] = description
    tool["inputSchema"] = copy.deepcopy(parameters)
    if annotations:
        hints = {
            "readOnlyHint": annotations.read_only,
            "destructiveHint": annotations.destructive,
            "idempotentHint": annotations.idempotent,
            "openWorldHint": annotations.open_world,
        }
        given = {key: value for key, value in hints.items() if value is not None}
        if annotations.title:
            given["title"] = annotations.title
        if given:
            tool["annotations"] = given
    return tool


def export_tool(tool: Tool, format: str, *, strict: bool = False) -> ExportedTool:
    """``tool`` as ``format`` expects it. ``strict`` applies to openai / openai-responses."""
    changes: list[str] = []
    definition = _definition(
        tool.name,
        tool.description,
        tool.parameters,
        format,
        strict=strict,
        annotations=tool.annotations,
        changes=changes,
    )
    return ExportedTool(definition, changes, tool.name)


def export_catalog(catalog: Catalog | Iterable[Tool], format: str, *, strict: bool = False) -> list[ExportedTool]:
    """Every tool of ``catalog`` in ``format``, in catalog order."""
    return [export_tool(tool, format, strict=strict) for tool in catalog]


def tool_definition_for(definition: ToolDefinition, format: str, *, strict: bool = False) -> dict[str, Any]:
    """The ``tools`` entry a provider adapter sends for ``definition`` (same conversion as the export).

    For gemini this is one function declaration; wrap the list with ``tools_payload``.
    """
    return _definition(
        definition.name,
        definition.description,
        definition.parameters,
        format,
        strict=strict,
        annotations=None,
        changes=[],
    )


def tools_payload(definitions: list[dict[str, Any]], format: str) -> Any:
    """The whole ``tools`` value for ``format``: a list, gemini's declarations, or MCP's ListToolsResult."""
    _check_format(format)
    if format == "gemini":
        return [{"functionDeclarations": definitions}]
    if format == "mcp":
        return {"tools": definitions}
    return definitions


def strip_strict_nulls(arguments: dict[str, Any], parameters: dict[str, Any]) -> dict[str, Any]:
    """Drop ``null`` values the strict schema forced for properties that were optional.

    Only top-level optional properties whose own schema does not allow null are dropped,
    so a real ``null`` the tool accepts is kept.
    """
    required = set(parameters.get("required", []))
    properties = parameters.get("properties", {})
    return {
        key: value
        for key, value in arguments.items()
        if not (value is None and key in properties and key not in required and not _allows_null(properties[key]))
    }


def _allows_null(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return schema is True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if None in schema.get("enum", [object()]):
        return True
    return any(_allows_null(branch) for branch in schema.get("anyOf", []) + schema.get("oneOf", []))
