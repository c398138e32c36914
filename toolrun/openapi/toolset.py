"""The imported toolset as text meant to be read, edited and kept.

A header comment says where it came from, which environment variables to set and what
was skipped and why; each tool is preceded by its operation's method and path. The
order is the document's (paths as written, methods in OpenAPI's order), so importing the
same document again gives the same file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml

from toolrun.openapi.operations import ImportedTool
from toolrun.openapi.security import Credentials

if TYPE_CHECKING:
    from toolrun.openapi.importer import ImportResult

_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
WIDTH = 100


class _Dumper(_BaseDumper):
    """Multi-line texts as literal blocks: descriptions stay readable."""


def _text(dumper: Any, value: str) -> Any:
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)


def _annotations(method: str) -> dict[str, bool]:
    """What the method says about the operation: GET/HEAD read-only, PUT/DELETE idempotent, DELETE destructive."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return {"read_only": True, "destructive": False, "idempotent": True}
    return {"read_only": False, "destructive": method == "DELETE", "idempotent": method in ("PUT", "DELETE")}


def tool_mapping(tool: ImportedTool) -> dict[str, Any]:
    """The tool as the mapping a tool file holds."""
    http: dict[str, Any] = {"method": tool.method, "url": tool.url}
    if tool.base_url:
        http["base_url"] = tool.base_url
    if tool.fixed_query:
        http["query"] = dict(tool.fixed_query)
    if tool.arguments:
        http["arguments"] = tool.arguments
    mapping: dict[str, Any] = {"name": tool.name, "description": tool.description,
                               "annotations": _annotations(tool.method), "parameters": tool.parameters,
                               "backend": {"http": http}}
    return mapping


def _dump(value: Any) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=WIDTH,
                     default_flow_style=False)


def _comment(text: str) -> str:
    return "\n".join(f"# {line}".rstrip() for line in text.splitlines())


def header(result: ImportResult) -> str:
    """The comment block at the top: origin, counts, variables to set, what was skipped and why."""
    lines = [f"Imported by `toolrun import openapi` from {result.source}",
             f"({result.title}, {result.spec_version}): {len(result.tools)} tools, {len(result.skipped)} skipped"
             + (f", {result.not_selected} not selected." if result.not_selected else "."),
             "Edit freely: sharpen the descriptions (say when to use each tool and when not), drop the tools",
             "a model should not have. `toolrun tools lint` shows what to improve."]
    if result.variables:
        lines.append("")
        lines.append("Set these environment variables:")
        lines += [f"  {name}: {what}" for name, what in result.variables.items()]
    if result.skipped:
        lines.append("")
        lines.append("Skipped:")
        lines += [f"  {entry}" for entry in result.skipped]
    if result.notes:
        lines.append("")
        lines.append("Notes:")
        lines += [f"  {note}" for note in result.notes]
    return _comment("\n".join(lines))


def render_toolset(result: ImportResult, creds: Credentials) -> str:
    """The whole toolset file."""
    http_defaults: dict[str, Any] = {}
    if result.base_url:
        http_defaults["base_url"] = result.base_url
    if creds.merged_headers():
        http_defaults["headers"] = creds.merged_headers()
    if creds.query:
        http_defaults["query"] = dict(creds.query)
    parts = [header(result), ""]
    if http_defaults:
        parts.append(_dump({"defaults": {"http": http_defaults}}).rstrip())
    if not result.tools:
        parts.append("tools: []  # nothing imported: see above")
        return "\n".join(parts) + "\n"
    parts.append("tools:")
    for tool in result.tools:
        parts.append(f"  # {tool.method} {tool.operation.path}")
        body = _dump([tool_mapping(tool)]).rstrip()
        parts.append("\n".join(f"  {line}" if line else line for line in body.splitlines()))
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"
