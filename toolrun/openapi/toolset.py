"""The imported toolset as text meant to be read, edited and kept.

A header comment says where it came from, which environment variables to set and what
was skipped and why; each tool is preceded by its operation's method and path. The
order is the document's (paths as written, methods in OpenAPI's order), so importing the
same document again gives the same file.
"""

from __future__ import annotations

import re
import textwrap
from typing import TYPE_CHECKING, Any

import yaml

from toolrun.core.credentials import CREDENTIAL_KEYS, is_credential
from toolrun.core.secrets import ENV_REFERENCE
from toolrun.openapi.operations import ImportedTool
from toolrun.openapi.overrides import Overrides, fingerprint
from toolrun.openapi.security import Credentials

if TYPE_CHECKING:
    from toolrun.openapi.importer import ImportResult

_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
WIDTH = 100
HEADER_START = "# Imported by `toolrun import openapi`"  # how an earlier import is recognised before it is replaced


class _Dumper(_BaseDumper):
    """Multi-line texts as literal blocks, small mappings and lists on one line: a file a person reads."""


class _OneLine(dict):
    """A mapping written in flow style: ``{read_only: true, idempotent: true}``."""


class _OneLineList(list):
    """A list written in flow style: ``[id, name]``."""


# Line breaks YAML knows besides \n (and that str.splitlines splits on): written as escapes, never raw.
_OTHER_BREAKS = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
# A comment holds one line of printable text: every line break, control and bidirectional or invisible
# format character of a document's text is shown as an escape (\x85, \u2028), so it cannot end the comment.
_NOT_COMMENT_TEXT = re.compile("[^\t\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
                               "|[\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff]")


def _text(dumper: Any, value: str) -> Any:
    if _OTHER_BREAKS.search(value):  # a double-quoted scalar escapes them: the file's lines are its \n lines
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    style = "|" if "\n" in value and not any(line != line.rstrip() for line in value.splitlines()) else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _text)
_Dumper.add_representer(_OneLine, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v, flow_style=True))
_Dumper.add_representer(_OneLineList, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))


def _wrapped(description: str) -> str:
    """Long lines folded at WIDTH for the reader; the text is the same words."""
    return "\n".join(textwrap.fill(line, WIDTH - 8, break_long_words=False, break_on_hyphens=False) if line else ""
                     for line in description.splitlines())


def _readable_schema(schema: Any) -> Any:
    """``required`` and ``enum`` lists of scalars on one line; everything else as it is."""
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key in ("required", "enum", "type") and isinstance(value, list) \
                    and all(isinstance(v, (str, int, float, bool)) or v is None for v in value):
                out[key] = _OneLineList(value)
            else:
                out[key] = _readable_schema(value)
        return out
    if isinstance(schema, list):
        return [_readable_schema(v) for v in schema]
    return schema


def plural(count: int, noun: str) -> str:
    """``1 tool``, ``2 tools``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


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
    headers = {**({"Content-Type": tool.content_type} if tool.content_type else {}), **tool.headers}
    if headers:
        http["headers"] = headers
    if tool.fixed_query or tool.query:
        http["query"] = {**tool.fixed_query, **tool.query}
    if tool.arguments:
        http["arguments"] = {name: _OneLine(where) if isinstance(where, dict) else where
                             for name, where in tool.arguments.items()}
    mapping: dict[str, Any] = {"name": tool.name, "description": _wrapped(tool.description),
                               "annotations": _OneLine(_annotations(tool.method)),
                               "parameters": _readable_schema(tool.parameters), "backend": {"http": http}}
    return mapping


class _PlainDumper(yaml.SafeDumper):
    """The pure-Python emitter, for a document whose text holds a lone surrogate ("\\ud800" in JSON): it
    writes it as an escape, where libyaml's emitter stops with an encoding error."""


for _kind, _representer in _Dumper.yaml_representers.items():
    _PlainDumper.add_representer(_kind, _representer)


def _dump(value: Any) -> str:
    options: dict[str, Any] = {"sort_keys": False, "allow_unicode": True, "width": WIDTH, "default_flow_style": False}
    try:
        return yaml.dump(value, Dumper=_Dumper, **options)
    except UnicodeEncodeError:
        return yaml.dump(value, Dumper=_PlainDumper, **options)


def comment_text(text: str) -> str:
    """``text`` as the content of one comment line: line breaks and controls escaped (``\\n``, ``\\u2028``)."""
    return _NOT_COMMENT_TEXT.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return {10: "\\n", 13: "\\r", 9: "\\t"}.get(code) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def _comment(lines: list[str]) -> str:
    return "\n".join(f"# {comment_text(line)}".rstrip() for line in lines)


def header(result: ImportResult) -> str:
    """The comment block at the top: origin, counts, variables to set, what was skipped and why."""
    edits = result.overrides_name or "the .overrides file of this file's name"
    lines = [f"{HEADER_START[2:]} from {result.source}",
             f"({result.title}, {result.spec_version}): {plural(len(result.tools), 'tool')}, "
             f"{len(result.skipped)} skipped"
             + (f", {result.not_selected} not selected." if result.not_selected else "."),
             f"Make your edits in {edits} beside this file, not here: sharpen the descriptions (say when to",
             "use each tool and when not), add headers or tools, drop the tools a model should not have. Every",
             "import applies them; an edit made here stops the next import. `toolrun tools lint` shows what to improve."]
    if result.variables:
        lines.append("")
        lines.append("Set these environment variables:")
        lines += [f"  {name}: {what}" for name, what in result.variables.items()]
    sections: list[tuple[str, list[Any]]] = [("Without credentials:", result.without_credentials), ("Skipped:", result.skipped),
                ("On another origin than the base URL:", result.other_origins), ("Notes:", result.notes)]
    for title, entries in sections:
        if entries:
            lines += ["", title, *(f"  {entry}" for entry in entries)]
    return _comment(lines)


def render_toolset(result: ImportResult, creds: Credentials, overrides: Overrides | None = None) -> str:
    """The whole toolset file: the import with ``overrides`` applied, ending with its fingerprint."""
    defaults = _defaults(result, creds)
    if overrides is not None:
        overrides.apply_defaults(defaults)
    http_defaults: dict[str, Any] = defaults["http"] if isinstance(defaults.get("http"), dict) else {}
    comments: dict[int, str] = {}
    mappings = []
    public: list[tuple[str, int]] = []  # (operation, its mapping's id) of each operation that needs no credentials
    for tool in result.tools:
        mapping = tool_mapping(tool)
        if tool.needs_no_credentials:
            _drop_default_credentials(mapping, http_defaults)
            public.append((tool.operation.label, id(mapping)))
        comments[id(mapping)] = f"{tool.method} {comment_text(tool.operation.path)}"
        mappings.append(mapping)
    added: list[dict[str, Any]] = []
    if overrides is not None:
        mappings, added, notes = overrides.apply_tools(mappings)
        result.notes += notes
    kept = {id(mapping) for mapping in mappings}
    result.without_credentials += [label for label, mapping_id in public if mapping_id in kept]
    result.variables = _variables_used(result.variables, [defaults, *mappings, *added])
    parts = [header(result), ""]
    if defaults:
        parts.append(_dump({"defaults": defaults}).rstrip())
    if not mappings and not added:
        parts.append("tools: []  # nothing imported: see above")
    else:
        parts.append("tools:")
    for mapping in [*mappings, *added]:
        parts.append(f"  # {comments.get(id(mapping), 'added in ' + (result.overrides_name or 'the overrides'))}")
        body = _dump([mapping]).rstrip()
        parts.append("\n".join(f"  {line}" if line else line for line in body.split("\n")))
        parts.append("")
    text = "\n".join(parts).rstrip() + "\n"
    return text + fingerprint(text)


def _defaults(result: ImportResult, creds: Credentials) -> dict[str, Any]:
    http_defaults: dict[str, Any] = {}
    if result.base_url:
        http_defaults["base_url"] = result.base_url
    if result.allow_hosts:
        http_defaults["allow_hosts"] = _OneLineList(result.allow_hosts)
    if creds.merged_headers():
        http_defaults["headers"] = creds.merged_headers()
    if creds.query:
        http_defaults["query"] = dict(creds.query)
    return {"http": http_defaults} if http_defaults else {}


def _drop_default_credentials(mapping: dict[str, Any], http_defaults: dict[str, Any]) -> None:
    """``security: []``: each credential of the defaults set to null in the tool (the loader then sends none)."""
    http = mapping["backend"]["http"]
    for key in CREDENTIAL_KEYS:
        entries = http_defaults.get(key)
        own = http.get(key) or {}
        nulls = {name: None for name, value in (entries or {}).items()
                 if is_credential(value) and name.lower() not in {k.lower() for k in own}}
        if nulls:
            http[key] = {**own, **nulls}


def _variables_used(known: dict[str, str], sections: list[dict[str, Any]]) -> dict[str, str]:
    """The environment variables the file reads, in the order the import named them: each ``${env:NAME}`` of
    a base_url, url, header or query entry (one named only by an edit says so)."""
    used: list[str] = []
    for section in sections:
        for http in _http_sections(section):
            values = [http.get("base_url"), http.get("url"), *(http.get("headers") or {}).values(),
                      *(http.get("query") or {}).values()]
            used += [name for value in values if isinstance(value, str) for name in ENV_REFERENCE.findall(value)]
    ordered = [name for name in known if name in used] + [name for name in dict.fromkeys(used) if name not in known]
    return {name: known.get(name, "read by an edit in the overrides file") for name in ordered}


def _http_sections(section: dict[str, Any]) -> list[dict[str, Any]]:
    """The http settings of a defaults mapping or of a tool mapping."""
    found = [section.get("http"), (section.get("backend") or {}).get("http") if isinstance(section.get("backend"), dict)
             else None]
    return [http for http in found if isinstance(http, dict)]
