"""Load a tools directory into a Catalog, reporting every problem of every file at once.

Per file: YAML syntax -> the packaged JSON Schema -> semantic rules (tool_builder) ->
names unique across files. A broken file never hides the problems of the others, and a
toolset's broken tool never hides its good neighbours.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toolrun.catalog.cache import SERVER_NAMES_UNKNOWN, CatalogCache
from toolrun.catalog.model import Catalog, LoadedTool, ServerOptions, UnstartedTool
from toolrun.core.errors import Problem, UserError
from toolrun.core.tool import FIND_TOOLS, Tool
from toolrun.core.yamlsource import LineDict, YamlSyntaxError, load_yaml_file

TOOL_FILE_SUFFIXES = (".yaml", ".yml")
_SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules"})


@dataclass
class LoadResult:
    """The tools that loaded, and every problem found (empty when the directory is clean)."""

    catalog: Catalog
    problems: list[Problem] = field(default_factory=list)
    names_by_file: dict[Path, list[str]] = field(default_factory=dict)  # every tool name a file declares, broken ones too
    notices: list[str] = field(default_factory=list)  # worth saying, not a problem (a server's tools changed)
    server_files: set[Path] = field(default_factory=set)  # MCP server toolsets: their names come from the server


def tool_files(directory: Path, suffixes: tuple[str, ...] = TOOL_FILE_SUFFIXES) -> list[Path]:
    """The tool files of ``directory`` and its subfolders in load order: *.yaml and *.yml (or ``suffixes``).

    Sorted by their path inside ``directory`` (a folder's files before its subfolders'), so
    the order is the same on every machine. Hidden files and folders (``.git``) and
    ``__pycache__`` are skipped; symlinked folders are not followed (no loops).
    """
    return [Path(path) for path in _tool_paths(directory, suffixes)]


def _tool_paths(directory: Path, suffixes: tuple[str, ...] = TOOL_FILE_SUFFIXES) -> list[str]:
    if not directory.exists():
        fix = f"pass --tools-dir DIR, or create {directory}/ with one YAML file per tool"
        raise UserError(Problem(directory, None, "tools directory not found", fix))
    if not directory.is_dir():
        fix = "pass --tools-dir with the folder that holds the tool files"
        raise UserError(Problem(directory, None, "is not a directory", fix))
    return _tool_paths_in(str(directory), suffixes)


def _tool_paths_in(folder: str, suffixes: tuple[str, ...]) -> list[str]:
    """``tool_files`` as strings: a name scan makes a Path only of the files it loads."""
    # os.scandir's entries know their type without a stat each: ~3x faster than os.walk + is_file.
    files: list[str] = []
    subfolders: list[str] = []
    with os.scandir(folder) as entries:
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            # The suffix as os.path.splitext gives it for a name not starting with a dot, without its call.
            tool_file = name[name.rfind("."):] in suffixes
            if tool_file and entry.is_file(follow_symlinks=False):  # most entries: known from the listing
                files.append(entry.path)
            elif entry.is_dir(follow_symlinks=False):  # a symlinked folder is not followed (no loops)
                if name not in _SKIPPED_FOLDERS:
                    subfolders.append(entry.path)
            # A broken symlink is kept so that reading it reports it; a folder named x.yaml is not a tool file.
            elif tool_file and _file_or_broken_link(entry):
                files.append(entry.path)
    # At each level a folder's own files come before its subfolders, each by name.
    found = sorted(files)
    for path in sorted(subfolders):
        found += _tool_paths_in(path, suffixes)
    return found


def _file_or_broken_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file() or (entry.is_symlink() and not os.path.exists(entry.path))
    except OSError:  # a symlink loop: kept, reading it says so
        return True


def load_catalog(directory: Path, *, names: Collection[str] | None = None,
                 cache: CatalogCache | None = None, wanted: Callable[[str], bool] | None = None,
                 refresh_servers: bool = False, required: Collection[str] | None = None) -> LoadResult:
    """Load every tool file of ``directory``; problems are collected, never raised (except a missing directory).

    With ``names``, only the files whose text mentions one of them are loaded (a name scan:
    a file that defines a tool spells its name; an ``mcp_server`` file, whose names come
    from the server, only when a name is not found in the others), so one tool of a large
    catalog costs one file's parsing; two files defining the name are both loaded, and the
    duplicate reported.
    With ``cache``, files unchanged since they were last loaded cleanly are not parsed again,
    and the name scan does not even read them (the cache knows the names they define).
    ``wanted`` tells which tools the caller needs (with ``names``: those names): an MCP server
    none of whose tools is wanted is not started when the file names its tools
    (``Catalog.unstarted`` has them). An MCP server's tools come from the cache of its last
    answer when there is one (``refresh_servers``: ask every server again). ``required``
    (default: ``names``) are names the caller needs: a server whose tools are neither named
    in its file nor cached is started only when one of them is not found in the other files
    (whether it defines one of them too is for ``toolrun tools lint`` to say).
    """
    paths = _tool_paths(directory)
    later: list[Path] = []  # MCP server files whose names only the server (or its cached list) knows
    if names is not None:
        mentions = list(zip(paths, _NameScan(names, cache).scan(paths), strict=True))
        files = [Path(path) for path, mention in mentions if mention is True]
        later = [Path(path) for path, mention in mentions if mention is SERVER_NAMES_UNKNOWN]
        if wanted is None:
            wanted = set(names).__contains__
        if required is None:
            required = names
    else:
        files = [Path(path) for path in paths]
        if cache is not None:
            cache.forget_missing({cache.key(path) for path in paths})
    result = LoadResult(Catalog(directory=directory))
    first_seen: dict[str, tuple[Path, int | None]] = {}
    servers = ServerOptions(refresh=refresh_servers, start=required is None)
    for file in files:
        _add_file(result, file, _load_tool_file_cached(file, cache, wanted, servers), first_seen, names)
    later += servers.skipped
    if later and not all(name in first_seen for name in required or ()):
        servers.skipped, servers.start = [], True  # a needed name may be one of theirs: ask them
        for file in later:
            _add_file(result, file, _load_tool_file_cached(file, cache, wanted, servers), first_seen, names)
    result.catalog.notices = result.notices = servers.notices
    result.server_files = servers.files
    return result


def _add_file(result: LoadResult, file: Path, loaded: tuple[list[LoadedTool], list[Problem]],
              first_seen: dict[str, tuple[Path, int | None]], names: Collection[str] | None) -> None:
    """Put the tools of one file in the catalog, its problems (duplicate names too) in ``result``."""
    tools, file_problems = loaded
    result.names_by_file[file] = [name for name, _, _ in tools]
    for name, line, tool in tools:
        if name == FIND_TOOLS:
            file_problems.append(Problem(file, line, f"the tool name '{name}' is reserved (the search tool "
                                         "of settings.tool_selection's search mode)", "rename the tool"))
            continue
        if name in first_seen:
            other_file, other_line = first_seen[name]
            message = f"duplicate tool name '{name}' (also defined at {other_file}:{other_line})"
            file_problems.append(Problem(file, line, message, "rename one of the two tools"))
            continue
        first_seen[name] = (file, line)
        if isinstance(tool, UnstartedTool):
            if names is None:  # a catalog of a few named tools does not list what it left out
                result.catalog.unstarted[name] = tool
        elif tool is not None:
            result.catalog.tools[name] = tool
    result.problems += sorted(_unique(file_problems), key=lambda p: p.line or 0)


class _NameScan:
    """Which files may define one of ``names``: True, False, or SERVER_NAMES_UNKNOWN, file by file."""

    def __init__(self, names: Collection[str], cache: CatalogCache | None) -> None:
        self.names, self.cache = names, cache
        # Looked up among a scanned file's words, each between spaces; only names made of word characters.
        self.needles = [f" {name} " for name in names] if all(map(_is_word, names)) else None

    def scan(self, paths: list[str]) -> list[bool | str]:
        """The answer for each of ``paths``: the cache's where it knows the file unchanged, else the file's text's.
        What is learned of the files read is kept, and forgotten of files no longer there."""
        answers = self._answers(paths)
        if self.cache is not None:
            self.cache.keep_words_of(paths)
        return answers

    def _answers(self, paths: list[str]) -> list[bool | str]:
        if self.cache is None:
            return [self.read(path, None) for path in paths]
        known = self.cache.known_mentions(paths, self.names, self.needles)
        return [answer if isinstance(answer, (bool, str)) else self.read(path, answer)
                for path, answer in zip(paths, known, strict=True)]

    def read(self, file: str, status: os.stat_result | None) -> bool | str:
        """The answer from the text of ``file`` (``status``: from before it is read, to keep its words by)."""
        cache = self.cache
        try:
            text = read_for_scan(file)
        except OSError:
            return True
        server = _server_toolset().search(text) is not None  # its tools are named by the server, not in the file
        # A name written with a YAML escape ("get_\x75ser") is not in the text as itself: only the parse tells
        # the names, so the file is loaded, and its words are not kept (they would not spell it either).
        escaped = not server and _escaped_name().search(text) is not None
        if cache is not None and status is not None and not escaped:
            cache.put_words(file, status, server, "" if server else _words_of(text))
        if server:
            return SERVER_NAMES_UNKNOWN
        return escaped or any(_name_pattern(name).search(text) is not None for name in self.names)


def read_for_scan(file: str) -> bytes:
    """The bytes of ``file`` for a name scan (one place, so a test can count what a scan reads)."""
    with open(file, "rb") as stream:
        return stream.read()


def _is_word(name: str) -> bool:
    # A name made only of a word's characters is found by a whole-word match exactly when it is one of the words.
    return _word().fullmatch(name.encode("utf-8")) is not None


def _words_of(text: bytes) -> str:
    """The distinct runs of letters, digits, ``_`` and ``-`` in ``text``, each between spaces."""
    return " " + " ".join({word.decode("ascii") for word in _word().findall(text)}) + " "


@functools.cache
def _word() -> re.Pattern[bytes]:
    return re.compile(rb"[\w-]+")  # bytes: \w is ASCII, as in _name_pattern


@functools.cache
def _server_toolset() -> re.Pattern[bytes]:
    # Compiled at the first name scan (toolrun call), not by every command that imports the loader.
    return re.compile(rb"^mcp_server\s*:", re.MULTILINE)


@functools.cache
def _escaped_name() -> re.Pattern[bytes]:
    # A double-quoted value with a backslash escape, of a `name` key (plain, quoted, JSON's "name") or of a
    # double-quoted key with an escape of its own ("n\x61me"): the places a tool's name can hide from a scan.
    # A tag or an anchor may stand before the value (name: !!str "get_\x75ser"); an alias (name: *who) names
    # a value written elsewhere, perhaps so.
    return re.compile(rb"""(?:(?<![\w-])name|"[^"\n]*\\[^"\n]*")["']?\s*:\s*(?:[!&][^\s"]*\s+)*(?:"[^"]*\\|\*)""")


@functools.lru_cache(maxsize=64)
def _name_pattern(name: str) -> re.Pattern[bytes]:
    # The name as a whole word of a tool name's characters: get_order does not match get_order_items.
    return re.compile(rb"(?<![\w-])" + re.escape(name.encode("utf-8")) + rb"(?![\w-])")


def _load_tool_file_cached(
    file: Path, cache: CatalogCache | None, wanted: Callable[[str], bool] | None, servers: ServerOptions
) -> tuple[list[LoadedTool], list[Problem]]:
    if cache is None:
        return load_tool_file(file, wanted=wanted, servers=servers)
    try:
        status = file.stat()
    except OSError:
        return load_tool_file(file)  # reports the broken symlink or the unreadable file
    cached = cache.get(file, status)
    if cached is not None:
        if not _wants_unstarted(cached, wanted):
            return cached, []
        cache.set_aside(file)
    read_from_ns = time.time_ns()
    tools, problems = load_tool_file(file, wanted=wanted, servers=servers)
    if not problems and file not in servers.skipped:  # a server left unasked is not a file without tools
        cache.put(file, status, tools, read_from_ns=read_from_ns)
    return tools, problems


def _wants_unstarted(tools: list[LoadedTool], wanted: Callable[[str], bool] | None) -> bool:
    """Whether the caller needs a tool kept as unstarted: then its server is started after all."""
    return any(isinstance(tool, UnstartedTool) and (wanted is None or wanted(name)) for name, _, tool in tools)


def load_catalog_or_raise(directory: Path, *, wanted: Callable[[str], bool] | None = None) -> Catalog:
    """The catalog of ``directory``; UserError listing every problem when there is any (``wanted``: see ``load_catalog``)."""
    result = load_catalog(directory, wanted=wanted)
    if result.problems:
        raise UserError(result.problems)
    return result.catalog


def load_tool_file(file: Path, *, wanted: Callable[[str], bool] | None = None,
                   servers: ServerOptions | None = None, document: Any = None) -> tuple[list[LoadedTool], list[Problem]]:
    """The tools of one file as (name, line, Tool or None when broken), and the file's problems.

    Names of broken tools are still returned so duplicate names are found across files.
    ``wanted``: see ``load_catalog`` (an MCP server's tools may come back as ``UnstartedTool``);
    ``servers``: whether to ask MCP servers afresh, and where to put what is worth saying;
    ``document``: the file as ``load_yaml_file`` read it, when the caller has read it already.
    """
    # What checks a file is imported when one is read: a warm cache serves every file without them.
    from toolrun.catalog.mcp_toolset import load_mcp_toolset
    from toolrun.catalog.tool_schema import schema_problems

    if document is None:
        try:
            document = load_yaml_file(file)
        except YamlSyntaxError as exc:
            return [], [exc.problem]
    shape = _document_shape_problem(document, file)
    if shape is not None:
        return [], [shape]

    problems: list[Problem] = []
    broken_paths: set[tuple[Any, ...]] = set()
    for path, problem in schema_problems(document, file):
        problems.append(problem)
        broken_paths.add(path[:3] if path[:1] == ("tools",) else path[:1])

    if "mcp_server" in document:
        server_tools, toolset_problems = load_mcp_toolset(document, file, broken_paths, wanted,
                                                          servers if servers is not None else ServerOptions())
        return server_tools, problems + toolset_problems
    entries, defaults, defaults_broken = _tool_entries(document, broken_paths)
    tools: list[LoadedTool] = []
    for path, raw in entries:
        if not isinstance(raw, LineDict):
            continue  # the schema already said it is not a mapping
        name = raw.get("name")
        tool = _entry_tool(raw, path, file, document, defaults, _broken_keys(broken_paths, path), defaults_broken,
                           problems)
        if isinstance(name, str) and name:
            tools.append((name, raw.key_lines.get("name", raw.line), tool))
    return tools, problems


def _tool_entries(document: Any, broken_paths: set[tuple[Any, ...]]
                  ) -> tuple[list[tuple[tuple[Any, ...], Any]], Any, bool]:
    """(path, mapping) of each tool of a file, its defaults, and whether those are broken: a list or a lone tool."""
    if "tools" not in document and "defaults" not in document:
        return [((), document)], None, False
    listed = document.get("tools")
    entries = [(("tools", index), raw) for index, raw in enumerate(listed)] if isinstance(listed, list) else []
    return entries, document.get("defaults"), ("defaults",) in broken_paths


def _entry_tool(raw: LineDict, path: tuple[Any, ...], file: Path, document: Any, defaults: Any,
                broken_keys: set[str], defaults_broken: bool, problems: list[Problem]) -> Tool | None:
    """One entry's Tool, None when it has a mistake; every mistake it has goes to ``problems``."""
    from toolrun.catalog.parameter_checks import parameter_problems
    from toolrun.catalog.tool_builder import build_tool

    type_only = "parameters" in broken_keys and _only_type_is_wrong(raw.get("parameters"))
    if type_only:  # BFCL's `type: dict`: still check the arguments and the backend, all at once
        raw, broken_keys = _with_object_parameters(raw), broken_keys - {"parameters"}
    if not defaults_broken and _checkable(raw, broken_keys):
        # Still run the semantic checks past a bad description or timeout: report everything at once.
        usable = _without(raw, broken_keys - {""})
        tool, tool_problems = build_tool(usable, file=file, document=document, path=path, defaults=defaults)
        problems += tool_problems
        return None if broken_keys or type_only else tool
    if "parameters" not in broken_keys:
        problems += parameter_problems(raw, file=file, document=document, path=path)
    return None


def _unique(problems: list[Problem]) -> list[Problem]:
    # A backend check and the loader may word the same mistake identically; say it once.
    return list({str(problem): problem for problem in problems}.values())


def _broken_keys(broken_paths: set[tuple[Any, ...]], tool_path: tuple[Any, ...]) -> set[str]:
    """The tool's own keys that have schema errors; "" for an error on the tool mapping itself."""
    keys: set[str] = set()
    for broken in broken_paths:
        if broken[: len(tool_path)] == tool_path:
            rest = broken[len(tool_path):]
            keys.add(str(rest[0]) if rest else "")
    return keys


def _checkable(raw: LineDict, broken_keys: set[str]) -> bool:
    # The semantic checks need a name, a schema-valid backend and schema-valid parameters.
    return (
        isinstance(raw.get("name"), str)
        and isinstance(raw.get("description", ""), str)
        and "backend" in raw
        and not broken_keys & {"name", "backend", "parameters"}
    )


def _only_type_is_wrong(parameters: Any) -> bool:
    """True when ``parameters`` has the right shape and only its top-level ``type`` is off (or missing)."""
    if not isinstance(parameters, dict):
        return False
    properties, required = parameters.get("properties", {}), parameters.get("required", [])
    return (
        isinstance(properties, dict)
        and all(isinstance(sub, (dict, bool)) for sub in properties.values())
        and isinstance(required, list)
        and all(isinstance(name, str) for name in required)
    )


def _with_object_parameters(raw: LineDict) -> LineDict:
    parameters = LineDict({**raw["parameters"], "type": "object"})
    parameters.line, parameters.key_lines = raw["parameters"].line, raw["parameters"].key_lines
    copy = LineDict({**raw, "parameters": parameters})
    copy.line, copy.key_lines = raw.line, raw.key_lines
    return copy


def _without(raw: LineDict, keys: set[str]) -> LineDict:
    if not keys:
        return raw
    copy = LineDict((k, v) for k, v in raw.items() if k not in keys)
    copy.line = raw.line
    copy.key_lines = raw.key_lines
    return copy


_WRITE_A_TOOL = "write one tool (name, description, backend) or a toolset (tools: [...])"


def _document_shape_problem(document: Any, file: Path) -> Problem | None:
    """An empty file or one that is not a mapping: nothing else can be checked in it."""
    if document is None:
        return Problem(file, None, "the file is empty", f"{_WRITE_A_TOOL}, or delete the file")
    if not isinstance(document, dict):
        from toolrun.core.schema_errors import describe_value

        fix = "put the list under 'tools:'" if isinstance(document, list) else _WRITE_A_TOOL
        message = f"expected a mapping (one tool or a toolset), got {describe_value(document)}"
        return Problem(file, getattr(document, "line", 1), message, fix)
    return None


__all__ = ["LoadResult", "TOOL_FILE_SUFFIXES", "load_catalog", "load_catalog_or_raise", "load_tool_file", "tool_files"]
