"""toolrun's own modules read from one file in the cache folder, for the ``toolrun`` script.

Python's import machinery costs about 290k instructions per module before the module's code
runs (the finders, the path arithmetic of the bytecode folder, opening and checking its
``.pyc``); a replayed recipe imports 76 toolrun modules, about 6 % of the command. The
script keeps the compiled code of the toolrun modules a command imported in
``modules-<command>-<toolrun folder>-<python>-<bytecode magic>-opt<-O level>-<format>.marshal``:
read once at start-up, each module then costs a ``stat`` of its source and (once per folder)
of its folder, whose size, modification and change times and inode must be those of when the
code was compiled, and its code. A module that is not in the file, whose source or folder
changed (a package or an extension module of its name made beside it is what Python would
import), or whose entry is damaged is imported as usual, and kept at exit: compiled from its
source, never taken from its ``.pyc``, which Python trusts on the whole-second mtime and size.

Packages (``__init__.py``) are always imported as usual, so their ``__path__`` and resources
are Python's own. A module read from the file has Python's own source loader, with its real
``__file__``: tracebacks, ``inspect``, ``get_source`` and ``runpy`` see its source. Each
toolrun (each checkout or install, by the folder of its package) has its own file, and only
sources in the running toolrun's folder are read from it. The file is trusted as the ``.pyc``
files of ``bytecode/`` beside it are: the folder is the user's own. ``TOOLRUN_CACHE_DIR=off``
turns it off.
"""

from __future__ import annotations

import atexit
import marshal
import os
import sys
import time
from binascii import crc32
from importlib.machinery import ModuleSpec, SourceFileLoader
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

import toolrun
from toolrun.cli.startup import command_name
from toolrun.core.cache_folder import cache_directory
from toolrun.core.private_files import replace_file

PACKAGE = "toolrun."
FILE_FORMAT = 2  # 2: each module's folder's status is kept too
RECENT_NS = 2_000_000_000  # a source changed this recently may change again within its clock tick: not kept yet
StatusKey = tuple[int, int, int, int]
Entry = tuple[str, StatusKey, StatusKey, bytes]  # the source, its status, its folder's status, the code


def status_key(status: os.stat_result) -> StatusKey:
    """What says a file or folder is unchanged: size, modification and change times, inode."""
    return (status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)


class KeptModuleLoader(SourceFileLoader):
    """Python's own loader for the source, but with the code kept in the file: ``get_source``,
    ``get_data``, resources and ``runpy`` work as for any module read from a ``.py``."""

    def __init__(self, fullname: str, path: str, code: CodeType, bundle: ModuleBundle) -> None:
        super().__init__(fullname, path)
        self.code = code
        self.bundle = bundle

    def get_code(self, fullname: str) -> CodeType:
        if fullname != self.name:
            return super().get_code(fullname)  # type: ignore[return-value]  # not asked by the import of this module
        self.bundle.served.add(fullname)
        return self.code


class ModuleBundle:
    """A meta path finder for the toolrun modules kept in ``path``."""

    def __init__(self, path: Path, package_folder: str) -> None:
        self.path = path
        self.package_folder = os.path.join(package_folder, "")  # sources outside it are another toolrun's
        self.imported_before: set[str] = set()  # the script's first modules: never read from the file
        self.kept: dict[str, Entry] = {}
        self.folders: dict[str, StatusKey | None] = {}  # each folder's status now, stat once in a process
        self.served: set[str] = set()  # modules this process read from the file
        self.stale = False  # a kept module was not used (its source changed, or it was damaged): the file is written again

    def install(self) -> None:
        """Read the kept modules and look for toolrun's modules here first."""
        if any(isinstance(finder, ModuleBundle) for finder in sys.meta_path):
            return
        self.kept = self._read()
        self.imported_before = set(sys.modules)
        sys.meta_path.insert(0, self)
        atexit.register(self.save)

    def _read(self) -> dict[str, Entry]:
        try:
            kept = marshal.loads(self.path.read_bytes())
        except Exception:  # missing, unreadable or not ours: everything is imported as usual
            return {}
        if not isinstance(kept, dict):
            return {}
        return {name: entry for name, entry in kept.items()
                if _well_formed(name, entry) and entry[0].startswith(self.package_folder)}

    # -- the finder the import system asks first -------------------------------------------------

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> ModuleSpec | None:
        entry = self.kept.get(fullname)
        if entry is None:
            return None
        source, source_status, folder_status, kept_code = entry
        code = None
        # The folder too: a package or an extension module of the same name made beside the
        # source since would be what Python imports, and making it changed the folder.
        if _status(source) == source_status and self._folder_status(os.path.dirname(source)) == folder_status:
            try:
                code = marshal.loads(kept_code)
            except Exception:  # a damaged entry: as a damaged .pyc, the source is compiled instead
                code = None
        if not isinstance(code, CodeType):
            self.stale = True
            del self.kept[fullname]
            return None  # imported as usual, and kept again at exit
        spec = ModuleSpec(fullname, KeptModuleLoader(fullname, source, code, self), origin=source)
        spec.has_location = True  # __file__ is the source, __cached__ where its .pyc would be
        return spec

    def _folder_status(self, folder: str) -> StatusKey | None:
        if folder not in self.folders:
            self.folders[folder] = _status(folder)
        return self.folders[folder]

    # -- at exit --------------------------------------------------------------------------------

    def save(self) -> None:
        """Write the file when this process imported a toolrun module the usual way; skipped when it cannot be."""
        fresh = {name: entry for name in sorted(sys.modules.copy())  # a copy: another thread may still import
                 if name.startswith(PACKAGE) and name not in self.served and name not in self.imported_before
                 and (entry := _compiled(name, self.package_folder)) is not None}
        if not fresh and not self.stale:
            return
        kept = self.kept | fresh  # what another path of the command imports stays kept too
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            replace_file(self.path, marshal.dumps(kept), prefix=".modules-")
        except (OSError, ValueError):
            pass


def _compiled(name: str, package_folder: str) -> Entry | None:
    """The entry of a module imported the usual way from a source in ``package_folder``; else None.

    Its code comes from its ``.pyc`` only when that was written well after the source last
    changed (its change time, which no tool sets back); otherwise it is compiled from the source
    read between two stats of it. Python trusts a ``.pyc`` on the source's whole-second mtime and
    size, which a same-size edit with the mtime set back gets past; compiling every module
    instead cost a first run about 0.2 s."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    if spec is None or spec.submodule_search_locations is not None or type(spec.loader) is not SourceFileLoader:
        return None  # a package, or a module that was not read from a .py file
    source = spec.origin
    if not isinstance(source, str) or not source.startswith(package_folder):
        return None
    try:
        folder = _status(os.path.dirname(source))
        before = os.stat(source)
        if _written_after(spec.cached, before.st_ctime_ns + RECENT_NS):
            code = spec.loader.get_code(name)  # the .pyc: checked by Python, and newer than any change
        else:
            code = spec.loader.source_to_code(spec.loader.get_data(source), source)
        after = os.stat(source)
    except Exception:  # unreadable, or not compiling now: not kept
        return None
    if folder is None or status_key(before) != status_key(after) or after.st_mtime_ns > time.time_ns() - RECENT_NS:
        return None
    return source, status_key(after), folder, marshal.dumps(code)


def _written_after(path: str | None, time_ns: int) -> bool:
    try:
        return path is not None and os.stat(path).st_mtime_ns > time_ns
    except OSError:
        return False


def _status(path: str) -> StatusKey | None:
    try:
        return status_key(os.stat(path))
    except OSError:
        return None


def _well_formed(name: Any, entry: Any) -> bool:
    return (isinstance(name, str) and name.startswith(PACKAGE) and isinstance(entry, tuple) and len(entry) == 4
            and isinstance(entry[0], str) and isinstance(entry[1], tuple) and isinstance(entry[2], tuple)
            and isinstance(entry[3], bytes))


def keep_modules(args: list[str]) -> None:
    """Read toolrun's modules from the cache folder's file for the command ``args`` run (see the module's docstring)."""
    folder = cache_directory()
    if folder is None:
        return
    package_folder = toolrun.__path__[0]  # as the import system names the submodules' sources
    toolrun_key = f"{crc32(package_folder.encode('utf-8', 'surrogatepass')):08x}"  # which toolrun: its folder
    # code objects are read back only by the Python that wrote them, at the same -O level (docstrings, asserts)
    python = f"{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}-opt{sys.flags.optimize}"
    name = f"modules-{command_name(args)}-{toolrun_key}-{python}-{FILE_FORMAT}.marshal"
    ModuleBundle(folder / name, package_folder).install()
