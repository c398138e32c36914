"""``toolrun tools show`` and ``toolrun tools export``: tool definitions in a provider's shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from toolrun.catalog.gate import every_tool
from toolrun.catalog.lint_rules import token_estimate
from toolrun.cli.common import complete_tool_names, load_catalog_for_cli, tools_dir_option
from toolrun.cli.text_param import TYPED_TEXT
from toolrun.core.errors import Problem, UserError
from toolrun.core.text import counted, json_printable
from toolrun.core.tool import Tool
from toolrun.export import FORMATS, ExportedTool, export_catalog, export_tool, tools_payload

format_option = click.option(
    "--format",
    "format_",
    type=click.Choice(FORMATS),
    help="Provider shape: " + ", ".join(FORMATS) + ".",
)
strict_option = click.option(
    "--strict-schema",
    "strict",
    is_flag=True,
    help="openai / openai-responses: convert the schema for strict mode (optional -> nullable, closed objects).",
)


def _dump(value: Any) -> str:
    return json_printable(value)


NOTES_PER_TOOL_IN_EXPORT = 3  # a large schema makes dozens of notes; `tools show` lists them all


def _print_changes(exported: list[ExportedTool], show_options: str, limit: int | None = None) -> None:
    for item in exported:
        shown = item.changes if limit is None else item.changes[:limit]
        for change in shown:
            click.echo(f"note: {item.name}: {change}", err=True)
        hidden = len(item.changes) - len(shown)
        if hidden:
            click.echo(
                f"note: {item.name}: and {counted(hidden, 'more change')}: "
                f"toolrun tools show {item.name} {show_options} lists them all",
                err=True,
            )


@click.command("show")
@click.argument("name", type=TYPED_TEXT, shell_complete=complete_tool_names)
@format_option
@strict_option
@tools_dir_option
def show_command(name: str, format_: str | None, strict: bool, tools_dir: Path | None) -> None:
    """Show one tool: a readable summary, or with --format its definition as JSON."""
    catalog = load_catalog_for_cli(tools_dir, names=[name])  # only the files that mention it
    tool = catalog.get(name)
    if tool is None:
        known = ", ".join(sorted(catalog.tools)[:20]) or "none"
        raise UserError(Problem(catalog.directory, None, f"no tool named {name!r}", f"known tools: {known}"))
    if format_ is None:
        click.echo(readable_summary(tool))
        return
    exported = export_tool(tool, format_, strict=strict)
    _print_changes([exported], "")
    click.echo(_dump(exported.definition))


@click.command("export")
@format_option
@strict_option
@tools_dir_option
def export_command(format_: str | None, strict: bool, tools_dir: Path | None) -> None:
    """Print the whole catalog as the provider's `tools` value (default openai; gemini:
    functionDeclarations, mcp: ListToolsResult)."""
    format_ = format_ or "openai"  # the shape most servers speak
    catalog = load_catalog_for_cli(tools_dir, lint_together=every_tool)  # exported for a model: linted together
    exported = export_catalog(catalog, format_, strict=strict)
    show_options = f"--format {format_}" + (" --strict-schema" if strict else "")
    _print_changes(exported, show_options, limit=NOTES_PER_TOOL_IN_EXPORT)
    click.echo(_dump(tools_payload([item.definition for item in exported], format_)))


def readable_summary(tool: Tool) -> str:
    """What a person wants to know about a tool, as plain text."""
    lines = [f"{tool.name}  ({tool.backend.kind}, {tool.source.file}:{tool.source.line})", ""]
    lines += [f"  {line}" for line in tool.description.splitlines() or [""]]
    lines.append("")
    properties = tool.parameters.get("properties", {}) or {}
    required = set(tool.parameters.get("required", []) or [])
    if properties:
        lines.append("Parameters:")
        for name, schema in properties.items():
            schema = schema if isinstance(schema, dict) else {}
            kind = schema.get("type", "any")
            kind = "|".join(kind) if isinstance(kind, list) else kind
            flag = "required" if name in required else "optional"
            extra = f" one of {json.dumps(schema['enum'], ensure_ascii=False)}" if "enum" in schema else ""
            lines.append(f"  {name} ({kind}, {flag}){extra}: {schema.get('description', '')}".rstrip(": "))
    else:
        lines.append("Parameters: none")
    settings = [f"timeout {tool.timeout:g}s", f"max_output {tool.max_output}"]
    if tool.sequential:
        settings.append("sequential")
    if tool.needs_confirmation:
        settings.append("asks for approval")
    lines.append("Settings: " + ", ".join(settings))
    if tool.annotations:
        hints = {k: v for k, v in vars(tool.annotations).items() if v is not None}
        lines.append("Annotations: " + ", ".join(f"{k}={v}" for k, v in hints.items()))
    lines.append(f"Cost: about {token_estimate(tool)} tokens per request (estimate)")
    return "\n".join(lines)
