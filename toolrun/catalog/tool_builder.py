"""One tool mapping -> a Tool: toolset defaults merged, the rules the schema cannot express checked.

The schema cannot see everything: whether ``parameters`` is itself a valid JSON Schema,
whether the backend is installed, whether a template names an argument that does not
exist. Those checks live here, each reported with the line it is about.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from toolrun.backends import BACKENDS, Backend, backend_targets, get_backend
from toolrun.catalog.parameter_checks import LineAt, parameter_schema_problems
from toolrun.core import templates
from toolrun.core.credentials import credentials_withheld
from toolrun.core.durations import parse_duration
from toolrun.core.errors import Problem
from toolrun.core.text import did_you_mean
from toolrun.core.tool import DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT_SECONDS, Annotations, BackendSpec, SourceLocation, Tool
from toolrun.core.yamlsource import LineDict, LineList, line_of, plain

_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
_TEMPLATE_MAP_KEYS = ("headers", "query", "env", "form")
_MERGED_MAPPING_DEFAULTS = {"http": ("headers", "query"), "shell": ("env",)}
_PLAIN_DEFAULTS = {"http": ("base_url", "timeout", "retries", "allow_hosts", "error_excerpt"), "shell": ("cwd",)}
_DURATION_FIX = "write it like 30s, 500ms or 2m"


def build_tool(
    raw: LineDict,
    *,
    file: Path,
    document: Any,
    path: tuple[Any, ...] = (),
    defaults: LineDict | None = None,
) -> tuple[Tool | None, list[Problem]]:
    """The Tool described by ``raw`` (with toolset ``defaults`` merged), or None and its problems.

    ``document`` and ``path`` locate ``raw`` inside the file so problems carry lines.
    """
    problems: list[Problem] = []
    name = str(raw["name"])
    label = f"tool '{name}'"

    def at(*steps: Any) -> int | None:
        return line_of(document, path + steps)

    parameters = plain(raw.get("parameters")) if "parameters" in raw else dict(_EMPTY_PARAMETERS)
    problems += parameter_schema_problems(parameters, file, label, lambda *steps: at("parameters", *steps))

    timeout = DEFAULT_TIMEOUT_SECONDS
    timeout_source = raw if "timeout" in raw else (defaults if defaults and "timeout" in defaults else None)
    if timeout_source is not None:
        try:
            timeout = parse_duration(timeout_source["timeout"])
        except ValueError as exc:
            # A bad default is one problem for the file, not one per tool: no tool label then.
            prefix = f"{label}: " if timeout_source is raw else "defaults."
            line = _line_in(timeout_source, "timeout", at())
            problems.append(Problem(file, line, f"{prefix}timeout: {exc}", _DURATION_FIX))

    backend, backend_problems = _backend_spec(raw, defaults, file, label, at)
    problems += backend_problems
    if backend is None:
        return None, problems

    tool = Tool(
        name=name,
        description=str(raw.get("description", "")),
        parameters=parameters,
        backend=backend,
        source=SourceLocation(file, raw.key_lines.get("name", raw.line), _key_lines(raw)),
        sequential=bool(_own_or_default(raw, defaults, "sequential", False)),
        max_concurrency=_own_or_default(raw, defaults, "max_concurrency", None),
        timeout=timeout,
        max_output=int(_own_or_default(raw, defaults, "max_output", DEFAULT_MAX_OUTPUT)),
        confirm=bool(_own_or_default(raw, defaults, "confirm", False)),
        annotations=_annotations(raw, defaults),
        lint_ignore=_lint_ignore(raw, defaults),
        check_formats=_own_or_default(raw, defaults, "check_formats", True) is not False,
    )
    problems += _backend_problems(tool, raw, defaults, file, label, at)
    return (None if problems else tool), problems


def _line_in(mapping: Any, key: str, fallback: int | None) -> int | None:
    if isinstance(mapping, LineDict):
        return mapping.key_lines.get(key, fallback)
    return fallback


def _own_or_default(raw: Mapping[str, Any], defaults: Mapping[str, Any] | None, key: str, fallback: Any) -> Any:
    if key in raw:
        return raw[key]
    if defaults and key in defaults:
        return defaults[key]
    return fallback


def _lint_ignore(raw: Mapping[str, Any], defaults: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The rules of ``lint: {ignore: [...]}``, the toolset's and the tool's own together."""
    names: list[str] = []
    for source in ((defaults or {}).get("lint"), raw.get("lint")):
        if isinstance(source, Mapping):
            names.extend(str(name) for name in source.get("ignore") or [])
    return tuple(dict.fromkeys(names))


def _annotations(raw: Mapping[str, Any], defaults: Mapping[str, Any] | None) -> Annotations | None:
    merged = {**plain((defaults or {}).get("annotations") or {}), **plain(raw.get("annotations") or {})}
    return Annotations(**merged) if merged else None


def _backend_spec(
    raw: LineDict, defaults: LineDict | None, file: Path, label: str, at: LineAt
) -> tuple[BackendSpec | None, list[Problem]]:
    backend = raw["backend"]
    kind = next(iter(backend))
    if kind not in BACKENDS:
        targets = backend_targets()
        guess = did_you_mean(str(kind), targets)
        fix = f"did you mean '{guess}'?" if guess else f"use one of {', '.join(targets)}"
        return None, [Problem(file, at("backend", kind), f"{label}: unknown backend '{kind}'", fix)]
    value = backend[kind]
    if kind == "python" and isinstance(value, str):
        config: dict[str, Any] = {"function": value}
    elif isinstance(value, dict):
        config = plain(value)
    else:
        config = {"value": plain(value)}  # a plugin backend written as a scalar
    config, withheld = _merge_backend_defaults(kind, config, defaults)
    problems: list[Problem] = []
    for key in _TEMPLATE_MAP_KEYS:
        if isinstance(config.get(key), dict):
            config[key] = {k: _as_text(v) for k, v in config[key].items()}
    if "timeout" in config:
        try:
            config["timeout"] = parse_duration(config["timeout"])
        except ValueError as exc:
            message = f"{label}: backend.{kind}.timeout: {exc}"
            problems.append(Problem(file, at("backend", kind, "timeout"), message, _DURATION_FIX))
    return BackendSpec(kind, config, withheld_credentials=withheld), problems


def _as_text(value: Any) -> Any:
    # YAML turns `PORT: 8080` into an int and `DEBUG: true` into a bool; headers/env need text.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return value


def _merge_backend_defaults(
    kind: str, config: dict[str, Any], defaults: Mapping[str, Any] | None
) -> tuple[dict[str, Any], tuple[tuple[str, tuple[str, ...]], ...]]:
    """``config`` with the toolset's defaults merged in, and the credentials among them kept from the tool."""
    section = plain((defaults or {}).get(kind) or {})
    if not section:
        return config, ()
    merged = dict(config)
    for key in _PLAIN_DEFAULTS.get(kind, ()):
        if key in section and key not in merged:
            merged[key] = section[key]
    # A toolset's credentials go only to the origin of its base_url (toolrun/core/credentials.py).
    withheld = credentials_withheld(section, config) if kind == "http" else {}
    for key in _MERGED_MAPPING_DEFAULTS.get(kind, ()):
        if key in section:
            own = merged.get(key) or {}
            # Header names are case-insensitive: a tool's "authorization" replaces the default "Authorization".
            fold = str.lower if key == "headers" else str
            own_names = {fold(k) for k in own}
            kept_back = set(withheld.get(key, ()))
            inherited = {k: v for k, v in section[key].items() if fold(k) not in own_names and k not in kept_back}
            # null drops a default: headers: {Authorization: null}
            merged[key] = {k: v for k, v in {**inherited, **own}.items() if v is not None}
    return merged, tuple((key, tuple(names)) for key, names in withheld.items())


def _backend_problems(
    tool: Tool, raw: LineDict, defaults: LineDict | None, file: Path, label: str, at: LineAt
) -> list[Problem]:
    """The backend's own static checks, and template placeholders that are not declared parameters."""
    kind = tool.backend.kind
    backend_line = at("backend", kind)
    try:
        backend = get_backend(kind)
        used = backend.placeholders(tool)
        # Parsed once, here: check reports parse's problems from it, and run reads the typed config.
        tool.backend = replace(tool.backend, parsed=_parsed(backend, tool))
        checked = backend.check(tool)
    except Exception as exc:  # a plugin (or an unfinished backend) must not crash loading
        message = f"{label}: backend '{kind}' cannot check this tool: {type(exc).__name__}: {exc}"
        return [Problem(file, backend_line, message, "reinstall toolrun or the plugin that provides this backend")]
    problems = [
        Problem(p.file or file, p.line or backend_line, _labelled(label, p.message), p.fix) for p in checked
    ]
    declared = set((tool.parameters.get("properties") or {}) if isinstance(tool.parameters, dict) else {})
    for name in sorted(used - declared):
        guess = did_you_mean(name, declared)
        problems.append(
            Problem(
                file,
                _placeholder_line(name, raw, defaults, kind, path_line=at) or backend_line,
                f"{label}: the template uses '{name}', which is not a declared parameter",
                f"did you mean '{guess}'?" if guess else f"declare '{name}' under parameters.properties, or fix the template",
            )
        )
    return problems


def _parsed(backend: Backend, tool: Tool) -> Any:
    """The backend's typed config or its problems; None (parsed when asked) when ``parse`` fails."""
    try:
        return backend.parse(tool.backend.config)
    except Exception:  # a plugin's parse that fails: its check (or its first call) meets the failure again
        return None


def _labelled(label: str, message: str) -> str:
    return message if message.startswith("tool '") else f"{label}: {message}"


def _placeholder_line(name: str, raw: LineDict, defaults: LineDict | None, kind: str, path_line: LineAt) -> int | None:
    """The line of the first string that uses ``name``: a template, a {path} parameter or $TOOLRUN_ARG_NAME."""

    def uses(text: str) -> bool:
        return name in templates.placeholders(text) or f"{{{name}}}" in text or f"TOOLRUN_ARG_{name.upper()}" in text

    for steps, text in _strings(raw["backend"][kind]):
        if uses(text):
            return path_line("backend", kind, *steps)
    if defaults and isinstance(defaults.get(kind), LineDict):
        for steps, text in _strings(defaults[kind]):
            if uses(text):
                return line_of(defaults[kind], steps)
    return None


def _strings(value: Any, steps: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], str]]:
    if isinstance(value, str):
        yield steps, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, steps + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, steps + (index,))


def _key_lines(node: Any, prefix: str = "", out: dict[str, int] | None = None) -> dict[str, int]:
    """Dotted key path -> line for everything under a tool's mapping (list items by index)."""
    out = {} if out is None else out
    if isinstance(node, LineDict):
        for key, value in node.items():
            dotted_key = f"{prefix}.{key}" if prefix else str(key)
            out[dotted_key] = node.key_lines.get(key, node.line)
            _key_lines(value, dotted_key, out)
    elif isinstance(node, LineList):
        for index, value in enumerate(node):
            dotted_key = f"{prefix}.{index}"
            out[dotted_key] = node.item_lines[index]
            _key_lines(value, dotted_key, out)
    return out
