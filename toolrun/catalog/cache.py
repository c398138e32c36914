"""What loading a tool file gave, kept on disk per file so an unchanged catalog is parsed once.

A file's entry is keyed by its name, size, modification and change times (nanoseconds) and
inode, inside one cache file per tools directory that also names the loader's own code (the
size and mtime of its source files): a changed file, or another toolrun, is read again,
never served stale.
Only files whose result depends on their own text, and on files known by name, are kept:
every tool loaded, and each of the shell or http backend, or a python tool naming a
``file.py`` (its check reads that file: the entry keeps the file's status key too, and a
changed ``.py`` file means the tool file is read again). A ``pkg.mod`` python tool (found
through the import system) or a plugin's tool (whose checks may read anything) is read every
time. An ``mcp_server`` file is kept only as the names it lists when its server was left
unstarted (a caller that wants one of them loads the file again, starting the server).
Each entry also keeps the per-tool lint findings once the lint has looked at the file.

The cache lives in ``$TOOLRUN_CACHE_DIR``, else ``$XDG_CACHE_HOME/toolrun``, else
``~/.cache/toolrun``; ``TOOLRUN_CACHE_DIR=off`` turns it off. Entries are plain values
written with ``marshal`` (no code runs when reading one). Each tools directory has two
files, each replaced atomically: ``.entries``, every entry one after the other, and
``.index``, each file's status key, the names it defines and where its entry is. A command
that needs one tool (``toolrun call``) reads the index and only the entries of the files
that define the name, so one tool of a 5,000-tool toolset file is not parsed again either.
A random token opens the entries and is named by the index: a pair written by two
processes does not match, and is ignored like a file that cannot be read. The index starts
with a digest of the rest and names each entry's digest: a damaged byte makes a miss (the
file is read again), never another tool.
A third file, ``.words``, keeps what a name scan learned of the files it read but did not
load (a ``call`` reads every file it knows nothing of to find the one that spells the name):
each file's status key and the words it spells (runs of letters, digits, ``_`` and ``-``, so
every name it can define), or that it is an MCP server's. The next ``call`` stats those
files and reads only the one that spells its name. It is read only by a name scan that
meets a file the index does not know, and checked against its digest like the index.
A fourth, ``.together``, keeps the findings of the rules about tools side by side (near
duplicates, tool count, token cost) with a digest of what they were computed from: every
tool's name and file, and each file's status key. A lint of a catalog none of whose files
changed (all served by the cache) takes them from there instead of comparing every pair.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import marshal
import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolrun.backends.python_target import source_file
from toolrun.catalog.lint import LintFinding
from toolrun.catalog.model import UnstartedTool
from toolrun.core.cache_folder import cache_directory
from toolrun.core.digests import blake2b, hex_key
from toolrun.core.private_files import replace_file
from toolrun.core.tool import Annotations, BackendSpec, SourceLocation, Tool

if TYPE_CHECKING:
    from toolrun.catalog.model import LoadedTool
    from toolrun.catalog.scan_words import ScanWords

CACHE_FORMAT = 5
TOKEN_SIZE = 16
FEW_PIECES = 8  # entries read one by one before the entries file is read whole (a call needs one or two)
DIGEST_SIZE = 16  # each file and each entry is checked against its digest: a damaged byte is a miss
SELF_CONTAINED_BACKENDS = frozenset({"http", "shell"})  # their load-time checks read only the tool file
_PACKAGE = Path(__file__).resolve().parent.parent

SERVER_NAMES_UNKNOWN = "server"  # a name scan's answer for an MCP server file: its names are not in its text
RECENT_NS = 2_000_000_000  # a file changed this recently may change again within its mtime's tick: not kept
# The file's status key, its tools, their findings (None until linted), and the other files its
# tools' checks read, each with its status key.
Entry = tuple[tuple[int, ...], Any, Any, tuple[tuple[str, tuple[int, ...]], ...]]


def catalog_code_stamp() -> str:
    """The stamp of the running code the catalog cache keys its files with."""
    return code_stamp(str(CACHE_FORMAT))


def code_stamp(version: str) -> str:
    """A digest of ``version`` and of the size and mtime of every toolrun source (``.py`` and
    ``.json``): a cache made by other code is not read. All of them, not a list kept by hand: any
    module may change what a cached catalog or recipe holds (a list missed secrets.py and errors.py)."""
    return blake2b(f"{version}\n{_sources_stamp()}".encode("utf-8", "surrogatepass"), digest_size=32).hexdigest()


@functools.cache
def _sources_stamp() -> str:
    """The sources' paths, sizes and mtimes, read once per process: ~140 stats, about 1 ms
    (scandir; os.walk took 7-12 ms)."""
    parts: list[str] = []
    folders = [str(_PACKAGE)]
    while folders:
        with os.scandir(folders.pop()) as entries:
            for entry in entries:
                if entry.name.endswith((".py", ".json")):
                    try:
                        status = entry.stat()
                    except OSError:
                        continue
                    parts.append(f"{entry.path}:{status.st_size}:{status.st_mtime_ns}")
                elif entry.name != "__pycache__" and entry.is_dir():  # bytecode changes when Python compiles
                    folders.append(entry.path)
    return "\n".join(sorted(parts))


class CatalogCache:
    """The cached files of one tools directory; ``save`` writes it back when anything changed."""

    def __init__(self, directory: Path, folder: Path | None) -> None:
        self.directory = directory
        self._prefix = os.path.join(str(directory), "")  # a file's key is its path after this
        self._index_path: Path | None = None
        self._entries_path: Path | None = None
        # status, names, offset, size, digest of the entry
        self._index: dict[str, tuple[tuple[int, ...], tuple[str, ...], int, int, bytes]] = {}
        self._token = b""
        self._stored: bytes | None = None  # the entries file, read whole once more than a few entries are needed
        self._pieces_read = 0
        self._entries: dict[str, Entry] = {}  # read from the entries file, or put in this process
        self._changed = False
        self._current: set[str] = set()  # files whose entry was checked against the disk in this process
        self._stamp = ""
        self._words_path: Path | None = None
        self._words: ScanWords | None = None  # read on first need
        if folder is None:
            return
        self._stamp = catalog_code_stamp()
        self._index_path = cache_file(directory, folder, ".index")  # one pair per directory: another toolrun replaces it
        self._entries_path = cache_file(directory, folder, ".entries")
        self._words_path = cache_file(directory, folder, ".words")
        try:
            loaded = marshal.loads(checked(self._index_path.read_bytes()))
        except (OSError, EOFError, ValueError, TypeError):
            return
        if isinstance(loaded, dict) and loaded.get("code") == self._stamp and isinstance(loaded.get("files"), dict) \
                and isinstance(loaded.get("token"), bytes):
            self._index, self._token = loaded["files"], loaded["token"]

    @classmethod
    def for_directory(cls, directory: Path) -> CatalogCache:
        """The cache of ``directory`` in the user's cache folder (empty and never saved when off)."""
        return cls(directory, cache_directory())

    def get(self, file: Path, status: os.stat_result) -> list[LoadedTool] | None:
        """The tools of ``file`` as last loaded, when it has not changed since."""
        key = self.key(file)
        entry = self._entry(key)
        if not isinstance(entry, tuple) or len(entry) != 4 or entry[0] != status_key(status) \
                or not _unchanged(entry[3]):
            return None
        try:
            tools: list[LoadedTool] = [
                (name, line, UnstartedTool(name, SourceLocation(file, line or 1)) if fields is None
                 else _tool(file, name, fields)) for name, line, fields in entry[1]]
        except (TypeError, ValueError):  # written by a toolrun whose entries read otherwise
            return None
        self._current.add(key)
        return tools

    def put(self, file: Path, before: os.stat_result, tools: list[LoadedTool], *,
            read_from_ns: int) -> None:
        """Keep the tools of ``file`` (loaded without a problem) when they depend on the file alone.

        ``before`` is the file's status from before it was read: a file changed while it was
        read, or so recently that a change within the same clock tick could go unseen, is not kept.
        ``read_from_ns`` is when the reading began (``time.time_ns()``): a ``.py`` file the check
        read, changed or replaced since (its ctime, which no tool can set back), is not kept either.
        """
        loaded = [tool for _, _, tool in tools if isinstance(tool, Tool)]
        unstarted = sum(isinstance(tool, UnstartedTool) for _, _, tool in tools)
        if self._index_path is None or (loaded and unstarted) or len(loaded) + unstarted < len(tools):
            return  # a broken tool: read the file again next time
        # An MCP server's tools left unstarted depend on the file alone (the names it lists).
        read = _files_read(loaded) if loaded else set()
        if read is None:
            return
        try:
            after = file.stat()
        except OSError:
            return
        if status_key(after) != status_key(before) or changed_recently(after):
            return
        depends: list[tuple[str, tuple[int, ...]]] = []
        for path in sorted(read):
            try:
                status = os.stat(path)
            except OSError:
                return
            if changed_recently(status) or status.st_ctime_ns >= read_from_ns:  # maybe after the check read it
                return
            depends.append((str(path), status_key(status)))
        fields = tuple((name, line, _tool_fields(tool) if isinstance(tool, Tool) else None) for name, line, tool in tools)
        self._entries[self.key(file)] = (status_key(before), fields, None, tuple(depends))
        self._current.add(self.key(file))
        self._changed = True

    def kept_stamps(self, files: list[str]) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
        """Each of ``files`` (the whole directory's) by key with its status key, then every other file their
        tools' checks read with its own: what says the catalog is unchanged. None unless this cache holds
        every one of them, checked against the disk in this process (a file read again is not kept)."""
        stamps: list[tuple[str, tuple[int, ...]]] = []
        depends: dict[str, tuple[int, ...]] = {}
        for file in files:
            key = self.key(file)
            entry = self._entries.get(key)
            if key not in self._current or entry is None or any(fields is None for _, _, fields in entry[1]):
                return None
            stamps.append((key, entry[0]))
            depends.update(entry[3])
        return (*stamps, *sorted(depends.items()))

    def set_aside(self, file: Path) -> None:
        """``file`` is read again after all (an unstarted server's tools are wanted): in this load its entry
        gives no findings and takes none (they would be about tools the entry does not hold)."""
        self._current.discard(self.key(file))

    def findings(self, file: Path) -> list[LintFinding] | None:
        """The per-tool lint findings of ``file``, when kept and the file is unchanged."""
        key = self.key(file)
        entry = self._entry(key)
        if key not in self._current or entry is None or entry[2] is None:
            return None
        where = str(file)
        try:
            return [_finding(where, *fields) for fields in entry[2]]
        except TypeError:  # written by a toolrun whose findings read otherwise
            return None

    def put_findings(self, file: Path, findings: list[LintFinding]) -> None:
        """Keep the per-tool lint findings of a file whose tools are kept."""
        key = self.key(file)
        entry = self._entry(key)
        if key in self._current and entry is not None:
            self._entries[key] = (entry[0], entry[1], tuple(_finding_fields(finding) for finding in findings),
                                             entry[3])
            self._changed = True

    def key(self, file: Path | str) -> str:
        """``file``'s entry: its path inside the directory (tool files may be in subfolders)."""
        path = str(file)  # a string prefix: Path.relative_to took a third of a warm lint's own time
        if path.startswith(self._prefix):
            return path[len(self._prefix):].replace(os.sep, "/")
        return path

    def known_mentions(self, paths: list[str], names: Collection[str], needles: list[str] | None
                       ) -> list[bool | str | os.stat_result]:
        """For each of ``paths``, what the cache knows unchanged of whether it may define one of ``names``:
        True or False (from the names it defines, or from the words a name scan kept, each between
        spaces as in ``needles``; None: names that are not single words), ``SERVER_NAMES_UNKNOWN``; else
        its status, to read it (True when it cannot be stat'ed: loading it reports why).

        One pass, the stats and lookups inlined: a call on 4,852 files spent more in the per-file
        method calls than in the stats."""
        index, prefix, posix = self._index, self._prefix, os.sep == "/"
        wanted = frozenset(names)
        words: ScanWords | None = None
        spelling: set[int] = set()  # the column places of the files whose words hold a needle
        found: list[bool | str | os.stat_result] = []
        for path in paths:
            try:
                status = os.stat(path)
            except OSError:
                found.append(True)
                continue
            stamp = (status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)
            key = path[len(prefix):] if posix and path.startswith(prefix) else self.key(path)
            try:
                known: Any = index.get(key)
                if known is not None and known[0] == stamp:  # loaded before: the names it defines
                    found.append(not wanted.isdisjoint(known[1]))
                    continue
                if needles is not None:
                    if words is None:
                        words = self._words_known()
                        spelling = words.spelling(needles)
                    place = words.position.get(key) if key not in words.added else None
                    if place is not None and words.stamps[place] == stamp:  # scanned before: the words it spells
                        found.append(SERVER_NAMES_UNKNOWN if place in words.servers else place in spelling)
                        continue
            except (TypeError, IndexError):  # not this toolrun's entry: read the file
                pass
            found.append(status)
        return found

    def put_words(self, file: Path | str, status: os.stat_result, server: bool, words: str) -> None:
        """Keep what a name scan read in ``file`` (``status``: from before it was read; a file written
        within the last ``RECENT_NS`` is not kept, as a change within its clock tick could go unseen)."""
        if self._words_path is None or changed_recently(status):
            return
        self._words_known().put(self.key(file), (status_key(status), server, words))

    def keep_words_of(self, present: list[str]) -> None:
        """Drop what the name scan kept of files no longer in the directory (``present``: their paths).

        Only when the words are written anyway, or there are more than files: a file gone unnoticed
        costs nothing but its place until then (an unchanged catalog does not key 4,852 paths again)."""
        if self._words is None or not (self._words.changed or len(self._words) > len(present)):
            return
        self._words.keep_only({self.key(path) for path in present})

    def together_key(self, tools: list[Tool], *extra: Any) -> bytes | None:
        """What the side-by-side findings of ``tools`` (and ``extra``, plain values) are computed from, as a
        digest; None when a tool's file is not kept by the cache (its status key would not say it is unchanged)."""
        if self._index_path is None:
            return None
        parts: list[Any] = [self._stamp, str(self.directory), extra]
        for tool in tools:
            key = self.key(tool.source.file)
            entry = self._entries.get(key)
            if key not in self._current or entry is None:
                return None
            parts.append((tool.name, key, entry[0]))
        return digest(marshal.dumps(parts))

    def together_findings(self, together_key: bytes) -> list[LintFinding] | None:
        """The side-by-side findings kept under ``together_key``, if those are the ones kept."""
        try:
            data = checked(self._together_path().read_bytes())
            kept_key, fields = marshal.loads(data)
            if kept_key != together_key:
                return None
            return [LintFinding(*finding) for finding in fields]
        except (OSError, EOFError, ValueError, TypeError):
            return None

    def put_together_findings(self, together_key: bytes, findings: list[LintFinding]) -> None:
        """Keep the side-by-side findings computed from ``together_key`` (one set per directory: the last)."""
        fields = [(f.tool, f.file, f.line, f.rule, f.severity, f.message) for f in findings]
        data = marshal.dumps((together_key, fields))
        with contextlib.suppress(OSError, ValueError):
            self._together_path().parent.mkdir(parents=True, exist_ok=True)
            replace_file(self._together_path(), digest(data) + data)

    def _together_path(self) -> Path:
        if self._index_path is None:
            raise ValueError("the cache is off")
        return self._index_path.with_suffix(".together")

    def _words_known(self) -> ScanWords:
        if self._words is None:
            from toolrun.catalog.scan_words import ScanWords  # start-up: only a name scan reads or keeps words

            self._words = ScanWords.empty()
            if self._words_path is not None:
                try:
                    loaded = marshal.loads(checked(self._words_path.read_bytes()))
                except (OSError, EOFError, ValueError, TypeError):
                    return self._words
                if isinstance(loaded, dict) and loaded.get("code") == self._stamp:
                    self._words = ScanWords.from_payload(loaded) or self._words
        return self._words

    def forget_missing(self, present: set[str]) -> None:
        """Drop the entries of files no longer in the directory (``present``: their keys)."""
        gone = (set(self._index) | set(self._entries)) - present
        for name in gone:
            self._index.pop(name, None)
            self._entries.pop(name, None)
        self._changed = self._changed or bool(gone)

    def save(self) -> None:
        """Write the cache back if it changed: the entries, then the index naming them (each atomically),
        and the name scan's words.

        A cache that cannot be written is skipped.
        """
        if self._words is not None and self._words.changed and self._words_path is not None:
            data = marshal.dumps({"code": self._stamp, **self._words.payload()})
            with contextlib.suppress(OSError):
                self._words_path.parent.mkdir(parents=True, exist_ok=True)
                replace_file(self._words_path, digest(data) + data)
                self._words.changed = False
        if self._index_path is None or self._entries_path is None or not self._changed:
            return
        token = os.urandom(TOKEN_SIZE)
        pieces: list[bytes] = [token]
        index: dict[str, tuple[tuple[int, ...], tuple[str, ...], int, int, bytes]] = {}
        offset = 0
        for key in sorted(set(self._index) | set(self._entries)):
            entry = self._entries.get(key)
            if entry is not None:
                piece, names = marshal.dumps(entry), tuple(name for name, _, _ in entry[1])
                status = entry[0]
            else:
                stored = self._stored_piece(key)
                if stored is None:
                    continue
                piece, (status, names, _, _, _) = stored, self._index[key]
            index[key] = (status, names, offset, len(piece), digest(piece))
            pieces.append(piece)
            offset += len(piece)
        try:
            self._index_path.parent.mkdir(parents=True, exist_ok=True)
            replace_file(self._entries_path, b"".join(pieces))
            index_data = marshal.dumps({"code": self._stamp, "token": token, "files": index})
            replace_file(self._index_path, digest(index_data) + index_data)
        except OSError:
            return
        self._changed = False

    def _entry(self, key: str) -> Entry | None:
        """The entry of ``key``: put in this process, or read from the entries file."""
        entry = self._entries.get(key)
        if entry is not None:
            return entry
        piece = self._stored_piece(key)
        if piece is None:
            return None
        try:
            entry = marshal.loads(piece)
        except (EOFError, ValueError, TypeError):
            return None
        if not isinstance(entry, tuple) or len(entry) != 4:
            return None
        self._entries[key] = entry
        return entry

    def _read_piece(self, known: Any) -> bytes | None:
        if self._entries_path is None:
            return None
        try:
            return _piece_of(self._entries_path, self._token, known)
        except (OSError, TypeError, ValueError):
            return None

    def _stored_piece(self, key: str) -> bytes | None:
        """The bytes of ``key``'s entry in the entries file: the first few read alone, then the file read whole once."""
        known = self._index.get(key)
        if known is None or self._entries_path is None:
            return None
        if self._stored is None and self._pieces_read < FEW_PIECES:  # a call needs one: not the whole file
            self._pieces_read += 1
            return self._read_piece(known)
        if self._stored is None:
            try:
                stored = self._entries_path.read_bytes()
            except OSError:
                stored = b""
            if stored[:TOKEN_SIZE] != self._token:  # not the entries this index was written with
                self._index, stored = {}, b""
            self._stored = stored
            if not stored:
                return None
        try:
            _, _, offset, size, expected = known
            start = TOKEN_SIZE + offset
            piece = self._stored[start:start + size]
        except (TypeError, ValueError):
            return None
        return piece if len(piece) == size and digest(piece) == expected else None


def cache_file(directory: Path, folder: Path, suffix: str) -> Path:
    """The cache file of ``directory`` in ``folder`` with ``suffix``: one set per directory, however it is spelled."""
    key = hex_key(str(directory.resolve()))
    return folder / f"catalog-{key}{suffix}"


def _piece_of(path: Path, token: bytes, known: Any) -> bytes | None:
    """The bytes of one entry read from the entries file at ``path`` (None when its token is not ``token``)."""
    _, _, offset, size, expected = known
    with open(path, "rb") as stream:
        if stream.read(TOKEN_SIZE) != token:
            return None
        stream.seek(TOKEN_SIZE + offset)
        piece = stream.read(size)
    return piece if len(piece) == size and digest(piece) == expected else None


def digest(data: bytes) -> bytes:
    """The digest that leads each cache file and names each entry."""
    return blake2b(data, digest_size=DIGEST_SIZE).digest()


def checked(data: bytes) -> bytes:
    """The payload of ``data`` (a digest, then the payload) when it matches its digest; ValueError if not."""
    payload = data[DIGEST_SIZE:]
    if len(data) < DIGEST_SIZE or digest(payload) != data[:DIGEST_SIZE]:
        raise ValueError("a damaged or foreign cache file")
    return payload


def _files_read(tools: list[Tool]) -> set[Path] | None:
    """The files besides their own that the tools' load-time checks read; None when not known."""
    read: set[Path] = set()
    for tool in tools:
        if tool.backend.kind in SELF_CONTAINED_BACKENDS:
            continue
        source = source_file(tool) if tool.backend.kind == "python" else None
        if source is None:  # a module found through the import system, or a plugin's backend
            return None
        read.add(source)
    return read


def _unchanged(depends: tuple[tuple[str, tuple[int, ...]], ...]) -> bool:
    """Every file in ``depends`` still has the status key it had when the entry was kept."""
    for path, key in depends:
        try:
            if status_key(os.stat(path)) != key:
                return False
        except OSError:
            return False
    return True


def changed_recently(status: os.stat_result) -> bool:
    """Written within ``RECENT_NS``: a change within the same clock tick could go unseen, so not kept yet."""
    return status.st_mtime_ns > time.time_ns() - RECENT_NS


def status_key(status: os.stat_result) -> tuple[int, ...]:
    """What says a file is unchanged: size, modification and change times, inode."""
    # ctime too: any write sets it, and unlike mtime no tool can set it back.
    return (status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)


# Tool fields kept as they are (plain values); name, source, backend and annotations are rebuilt.
_PLAIN_FIELDS = tuple(f.name for f in dataclasses.fields(Tool)
                      if f.name not in ("name", "source", "backend", "annotations"))


def _tool_fields(tool: Tool) -> tuple[Any, ...]:
    annotations = tool.annotations
    # Every field of the model: a field added to Tool later is kept too (the code stamp drops old caches).
    return (tool.backend.kind, tool.backend.config, tool.backend.withheld_credentials, tool.source.line,
            tool.source.key_lines, None if annotations is None else dataclasses.astuple(annotations),
            tuple(getattr(tool, name) for name in _PLAIN_FIELDS))


def _tool(file: Path, name: str, fields: tuple[Any, ...]) -> Tool:
    kind, config, withheld, line, key_lines, annotations, plain_values = fields
    values = dict(zip(_PLAIN_FIELDS, plain_values, strict=True))
    if isinstance(values.get("lint_ignore"), list):
        values["lint_ignore"] = tuple(values["lint_ignore"])
    return Tool(name=name, backend=BackendSpec(kind, config, withheld_credentials=withheld), source=SourceLocation(file, line, key_lines),
                annotations=None if annotations is None else Annotations(*annotations), **values)


def _finding_fields(finding: LintFinding) -> tuple[Any, ...]:
    return (finding.tool, finding.line, finding.rule, finding.severity, finding.message)


def _finding(file: str, tool: str | None, line: int | None, rule: str, severity: str, message: str) -> LintFinding:
    # Set as a frozen dataclass's __init__ would, without its object.__setattr__ per field: a warm
    # lint of 1,213 BFCL tools builds 7,931 of them (about a third of their cost).
    finding = object.__new__(LintFinding)
    finding.__dict__.update(tool=tool, file=file, line=line, rule=rule, severity=severity, message=message,
                            ignored=False)
    return finding
