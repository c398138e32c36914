"""A toolset file whose tools come from an MCP server (``mcp_server:``), turned into our Tools.

The server's tools come from the cache of its last answer (``server_listing``), else the
server is asked for them at load — unless the command wants none of them:
when ``mcp_server.tools`` lists plain names (no globs), their catalog names are known from
the file alone, and a recipe or ``toolrun call`` that needs none of them leaves the server
unstarted (the names still count for duplicates). Each becomes a Tool of the
``mcp_server`` backend: the server's name (with ``prefix``), description, input schema
and annotation hints, then the file's per-tool overrides. From there they are checked
and linted like any other tool, and their arguments are validated before they are sent.
A server that cannot start or answer is a problem of this file only, with the server's
stderr tail; the other files of the catalog load as usual, and a command that needs none
of this file's tools runs (see ``gate``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from toolrun.catalog.model import LoadedTool, ServerOptions, UnstartedTool
from toolrun.catalog.parameter_checks import parameter_schema_problems
from toolrun.catalog.server_listing import (
    FAILED_START_MEMORY_SECONDS,
    ListedTool,
    ServerListing,
    listing_changes,
    listing_key,
    now,
    read_listing,
    write_listing,
)
from toolrun.core.durations import parse_duration
from toolrun.core.errors import Problem
from toolrun.core.text import did_you_mean, is_glob, matches_any
from toolrun.core.tool import DEFAULT_MAX_OUTPUT, DEFAULT_TIMEOUT_SECONDS, Annotations, BackendSpec, SourceLocation, Tool
from toolrun.core.yamlsource import LineDict, line_of, plain

_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_HINTS = {"readOnlyHint": "read_only", "destructiveHint": "destructive", "idempotentHint": "idempotent",
          "openWorldHint": "open_world"}
_DURATION_FIX = "write it like 30s, 500ms or 2m"

ToolWanted = Callable[[str], bool]


def load_mcp_toolset(document: LineDict, file: Path, broken_paths: set[tuple[Any, ...]],
                     wanted: ToolWanted | None = None, servers: ServerOptions | None = None
                     ) -> tuple[list[LoadedTool], list[Problem]]:
    """The tools of an ``mcp_server`` file; ``broken_paths`` are the schema's problems already reported.

    With ``wanted`` (a test of a catalog name), a file whose names are known without the
    server and of which none is wanted gives ``UnstartedTool``s: no server is started.
    Otherwise the server's tools come from the cache of its last answer, or from the server
    (``servers.refresh``: always from the server).
    """
    server_line = line_of(document, ("mcp_server",))
    servers = servers if servers is not None else ServerOptions()
    servers.files.add(file)
    problems = _misplaced_defaults(document, file)
    if any(path[:1] == ("mcp_server",) for path in broken_paths):
        return [], problems  # the server's own settings are wrong: do not start anything
    settings = _server_settings(document, file, problems)
    if settings is None:
        return [], problems
    config, timeout = settings
    names = declared_names(config)
    if wanted is not None and names is not None and not problems and not any(map(wanted, names)):
        return [(name, server_line, UnstartedTool(name, SourceLocation(file, server_line or 1))) for name in names], []

    remote_tools, failure = server_tools(config, file, servers, needed=names is not None)
    if remote_tools is None:
        if failure is None:  # left unasked (servers.skipped): nothing is known about it yet
            return [], problems
        return [], problems + [Problem(file, server_line, failure, _START_FIX)]
    return _served_tools(remote_tools, config, timeout, document, file, broken_paths, problems), problems


_START_FIX = "run the command yourself (or open the url) to see why; toolrun tools list --refresh tries it again at once"


def server_tools(config: dict[str, Any], file: Path, servers: ServerOptions, *, needed: bool = False
                 ) -> tuple[list[ListedTool] | None, str | None]:
    """The server's tools, from the cache of its last answer or from the server; or None and why not
    (None and None: left unasked, as ``servers.start`` says, unless the caller wants one of them: ``needed``).

    A start that failed less than ``FAILED_START_MEMORY_SECONDS`` ago is not tried again
    (unless ``servers.refresh``). A live answer that differs from the cached one replaces it,
    and ``servers.notices`` says so.
    """
    key = listing_key(file, config)
    live = servers.refresh or _changed_since_listed(config, file)
    cached = None if live else read_listing(file, key)
    if cached is not None and cached.tools is not None:
        return cached.tools, None
    moment = now()
    if cached is not None and cached.failure is not None and cached.failed_recently(moment):
        ago = max(0, round(moment - cached.failed_at))
        return None, f"{cached.failure} (tried {ago}s ago; not tried again for {FAILED_START_MEMORY_SECONDS:g}s)"

    if not (servers.start or servers.refresh or needed):
        servers.skipped.append(file)
        return None, None

    from toolrun.backends.mcp_server import McpServerUnavailable, list_server_tools

    try:
        listed = [ListedTool(tool.name, tool.description, dict(tool.input_schema), tool.title, dict(tool.annotations),
                             tool.problem) for tool in list_server_tools(config, file.parent)]
    except McpServerUnavailable as exc:
        write_listing(file, key, ServerListing(None, str(exc), moment))
        return None, str(exc)
    before = read_listing(file, None)
    changes = listing_changes(before.tools, listed) if before is not None and before.tools is not None else None
    if changes:
        servers.notices.append(f"{file}: the MCP server's tools changed since they were cached ({changes}); "
                               "the cache now holds the new list")
    write_listing(file, key, ServerListing(listed))
    return listed, None


def _changed_since_listed(config: dict[str, Any], file: Path) -> bool:
    """Whether a server connected in this process said (list_changed) that its tools changed since it listed them."""
    clients = sys.modules.get("toolrun.backends.mcp_server")  # not imported: no server was ever connected
    return clients is not None and clients.tools_changed_since_listed(config, file.parent)


def _misplaced_defaults(document: LineDict, file: Path) -> list[Problem]:
    if "defaults" not in document:
        return []
    return [Problem(file, line_of(document, ("defaults",)), "a file of MCP server tools has no defaults",
                    "put timeout under mcp_server:, and per-tool settings under tools:")]


def _server_settings(document: LineDict, file: Path, problems: list[Problem]) -> tuple[dict[str, Any], float] | None:
    """The ``mcp_server`` settings with the timeout read, or None after adding the problem that stops the file."""
    config = plain(document["mcp_server"])
    if bool(config.get("command")) == bool(config.get("url")):
        fix = "write command: [python, -m, our_mcp_server] for a local server, or url: https://host/mcp"
        problems.append(Problem(file, line_of(document, ("mcp_server",)), "mcp_server needs exactly one of command and url", fix))
        return None
    timeout = DEFAULT_TIMEOUT_SECONDS
    if "timeout" in config:
        try:
            timeout = config["timeout"] = parse_duration(config["timeout"])
        except ValueError as exc:
            problems.append(Problem(file, line_of(document, ("mcp_server", "timeout")), f"mcp_server.timeout: {exc}", _DURATION_FIX))
            return None
    return config, timeout


def _served_tools(remote_tools: list[Any], config: dict[str, Any], timeout: float, document: LineDict, file: Path,
                  broken_paths: set[tuple[Any, ...]], problems: list[Problem]) -> list[LoadedTool]:
    """The selected tools of the server as catalog tools, each with its override; their problems go to ``problems``."""
    server_line = line_of(document, ("mcp_server",))
    by_name = {tool.name: tool for tool in remote_tools if tool.name}
    selection = config.get("tools")
    problems += _unknown_selection(selection, by_name, file, document)
    problems += [_rejected(tool, "", file, server_line) for tool in remote_tools if not tool.name and selection is None]
    chosen = [tool for tool in remote_tools if tool.name and matches_any(tool.name, selection)]
    prefix = str(config.get("prefix") or "")
    overrides, broken, override_problems = _overrides(document, file, broken_paths, {t.name for t in chosen}, prefix)
    problems += override_problems

    loaded: list[LoadedTool] = []
    server_config = {key: value for key, value in config.items() if key not in ("tools", "prefix")}
    for remote in chosen:
        name = prefix + remote.name
        override_path, override = overrides.get(remote.name, (None, None))
        line = line_of(document, override_path) if override_path else server_line
        if remote.problem:  # the server's entry of it is not a tool: the name is kept, as for any broken tool
            problems.append(_rejected(remote, name, file, line))
            loaded.append((name, line, None))
            continue
        if not _TOOL_NAME.match(name):
            problems.append(_unusable_name(remote.name, name, file, server_line))
            continue
        if remote.name in broken:  # its override has a mistake: not served without it (a confirm: it names, say)
            loaded.append((name, line, None))
            continue
        tool, tool_problems = _tool(name, remote, override or {}, server_config, timeout, file, document, override_path, line)
        problems += tool_problems
        loaded.append((name, line, tool))
    return loaded


def _rejected(remote: ListedTool, name: str, file: Path, line: int | None) -> Problem:
    """A tool the server lists in a shape the protocol does not allow (``remote.problem``, one line)."""
    which = f"the server's tool {remote.name!r}" if remote.name else "a tool the server lists without a name"
    if name and name != remote.name:
        which += f" (catalog name {name!r})"
    fix = ("only the server can fix its entry (an MCP tool has a name and an inputSchema of type object); to load "
           "this file without the problem, select the tools you want under mcp_server.tools")
    return Problem(file, line, f"{which} cannot be used: {remote.problem}", fix)


def _unusable_name(remote_name: str, name: str, file: Path, server_line: int | None) -> Problem:
    message = f"the server's tool {remote_name!r} gives the catalog name {name!r}, which is not 1-64 letters, digits, _ or -"
    fix = ("choose a shorter prefix, or leave the tool out under mcp_server.tools" if len(name) > 64
           else "leave the tool out: list the tools you want under mcp_server.tools")
    return Problem(file, server_line, message, fix)


def declared_names(config: dict[str, Any]) -> list[str] | None:
    """The catalog names of the server's tools when the file lists them by name; None when a glob (or nothing) selects them."""
    selection = config.get("tools")
    if not isinstance(selection, list) or not all(isinstance(name, str) for name in selection):
        return None
    if any(is_glob(name) for name in selection):
        return None
    prefix = str(config.get("prefix") or "")
    return list(dict.fromkeys(prefix + name for name in selection))


def _unknown_selection(selection: list[str] | None, by_name: dict[str, Any], file: Path, document: Any) -> list[Problem]:
    problems = []
    for index, glob in enumerate(selection or []):
        if not any(fnmatchcase(name, glob) for name in by_name):
            guess = did_you_mean(glob, by_name)
            fix = f"did you mean '{guess}'?" if guess else f"the server has: {', '.join(sorted(by_name)) or 'no tools'}"
            problems.append(Problem(file, line_of(document, ("mcp_server", "tools", index)),
                                    f"mcp_server.tools: the server has no tool matching {glob!r}", fix))
    return problems


def _overrides(document: Any, file: Path, broken_paths: set[tuple[Any, ...]], chosen: set[str], prefix: str
               ) -> tuple[dict[str, tuple[tuple[Any, ...], dict[str, Any]]], set[str], list[Problem]]:
    """Server tool name -> (path in the file, the override's settings); the names whose override is broken."""
    found: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
    broken_names: set[str] = set()
    problems: list[Problem] = []
    entries = document.get("tools")
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        path = ("tools", index)
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("name"))
        remote_name = name.removeprefix(prefix) if prefix and name.startswith(prefix) and name not in chosen else name
        if any(broken[:2] == path for broken in broken_paths):  # the schema's problem is reported already
            broken_names.add(remote_name)
            continue
        if remote_name not in chosen:
            guess = did_you_mean(remote_name, chosen)
            fix = f"did you mean '{guess}'?" if guess else "name one of the server's tools selected under mcp_server.tools"
            message = f"tools: the server offers no selected tool named {name!r}"
            problems.append(Problem(file, line_of(document, (*path, "name")), message, fix))
            continue
        found[remote_name] = (path, plain(entry))
    return found, broken_names, problems


def _tool(name: str, remote: Any, override: dict[str, Any], server_config: dict[str, Any], timeout: float, file: Path,
          document: Any, override_path: tuple[Any, ...] | None, line: int | None) -> tuple[Tool | None, list[Problem]]:
    label = f"tool '{name}'"
    problems: list[Problem] = []
    parameters = remote.input_schema if isinstance(remote.input_schema, dict) else {"type": "object"}
    problems += parameter_schema_problems(parameters, file, label, lambda *steps: line)
    own_timeout = timeout
    if "timeout" in override:
        try:
            own_timeout = parse_duration(override["timeout"])
        except ValueError as exc:
            where = line_of(document, (*(override_path or ()), "timeout"))
            problems.append(Problem(file, where, f"{label}: timeout: {exc}", _DURATION_FIX))
    hints = {ours: remote.annotations[wire] for wire, ours in _HINTS.items() if isinstance(remote.annotations.get(wire), bool)}
    if remote.title:
        hints["title"] = remote.title
    hints.update(override.get("annotations") or {})
    key_lines = dict(document.get("tools")[override_path[1]].key_lines) if override_path and isinstance(
        document.get("tools")[override_path[1]], LineDict) else {}
    tool = Tool(
        name=name,
        description=str(override.get("description", remote.description)),
        parameters=parameters,
        backend=BackendSpec("mcp_server", {**server_config, "tool": remote.name}),
        source=SourceLocation(file, line or 1, key_lines),
        sequential=bool(override.get("sequential", False)),
        timeout=own_timeout,
        max_output=int(override.get("max_output", DEFAULT_MAX_OUTPUT)),
        confirm=bool(override.get("confirm", False)),
        annotations=Annotations(**hints) if hints else None,
        check_formats=override.get("check_formats", True) is not False,
    )
    return (None if problems else tool), problems
