"""toolrun's own modules read from one file in the cache folder, for the ``toolrun`` script.

Python's import machinery costs about 290k instructions per module before the module's code
runs (the finders, the path arithmetic of the bytecode folder, opening and checking its
``.pyc``); a replayed recipe imports 76 toolrun modules, about 6 % of the command. The
script keeps the compiled code of the toolrun modules a command imported in
``modules-<command>-<python>-<bytecode magic>.marshal``: read once at start-up, each module
then costs one ``stat`` of its source, whose size, modification and change times and inode
must be those the code was compiled from, and its code. A module that is not in the file,
or whose source changed, is imported as usual and added to the file at exit. Each toolrun
(each checkout or install, by the folder of its package) has its own file, and a module is
only read from the file when its source is in the running toolrun's own folder.

Packages (``__init__.py``) are always imported as usual, so their ``__path__`` and their
resources are Python's own; a module read from the file has its real ``__file__``, so
tracebacks and ``inspect`` show its source. Only modules of the ``toolrun`` package are
kept. The file is trusted as the ``.pyc`` files of ``bytecode/`` beside it are: the folder
is the user's own. ``TOOLRUN_CACHE_DIR=off`` turns it off.
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
from typing import TYPE_CHECKING, Any, cast

import toolrun
from toolrun.cli.startup import command_name, replace_file
from toolrun.core.cache_folder import cache_directory

if TYPE_CHECKING:
    from importlib.abc import Loader

PACKAGE = "toolrun."
FILE_FORMAT = 1
RECENT_NS = 2_000_000_000  # a source changed this recently may change again within its clock tick: not kept yet
StatusKey = tuple[int, int, int, int]


def status_key(status: os.stat_result) -> StatusKey:
    """What says a source is unchanged: size, modification and change times, inode."""
    return (status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)


class ModuleBundle:
    """A meta path finder and loader for the toolrun modules kept in ``path``."""

    def __init__(self, path: Path, package_folder: str) -> None:
        self.path = path
        self.package_folder = os.path.join(package_folder, "")  # sources outside it are another toolrun's
        self.imported_before: set[str] = set()  # the script's first modules: never read from the file
        self.kept: dict[str, tuple[str, StatusKey, bytes]] = {}  # module -> its source, that source's status, code
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

    def _read(self) -> dict[str, tuple[str, StatusKey, bytes]]:
        try:
            kept = marshal.loads(self.path.read_bytes())
        except Exception:  # missing, unreadable or not ours: everything is imported as usual
            return {}
        if not isinstance(kept, dict):
            return {}
        return {name: entry for name, entry in kept.items()
                if _well_formed(name, entry) and entry[0].startswith(self.package_folder)}

    # -- the finder and loader the import system calls ---------------------------------------

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> ModuleSpec | None:
        entry = self.kept.get(fullname)
        if entry is None:
            return None
        source = entry[0]
        try:
            status = status_key(os.stat(source))
        except OSError:
            status = None
        code = None
        if status == entry[1]:
            try:
                code = marshal.loads(entry[2])
            except Exception:  # a damaged entry: as a damaged .pyc, the source is compiled instead
                code = None
        if not isinstance(code, CodeType):
            self.stale = True
            del self.kept[fullname]
            return None  # imported as usual, and kept again at exit
        spec = ModuleSpec(fullname, cast("Loader", self), origin=source)  # a loader by its two methods below
        spec.has_location = True  # __file__ is the source
        spec.loader_state = code
        return spec

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # the usual module object

    def exec_module(self, module: ModuleType) -> None:
        spec = module.__spec__
        assert spec is not None and isinstance(spec.loader_state, CodeType)  # this finder's own spec
        self.served.add(spec.name)
        exec(spec.loader_state, module.__dict__)

    # -- at exit --------------------------------------------------------------------------------

    def save(self) -> None:
        """Write the file when this process imported a toolrun module the usual way; skipped when it cannot be."""
        fresh = {name: entry for name in sorted(sys.modules.copy())  # a copy: another thread may still import
                 if name.startswith(PACKAGE) and name not in self.served and name not in self.imported_before
                 and (entry := _compiled(name)) is not None and entry[0].startswith(self.package_folder)}
        if not fresh and not self.stale:
            return
        kept = self.kept | fresh  # what another path of the command imports stays kept too
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            replace_file(self.path, marshal.dumps(kept), prefix=".modules-")
        except (OSError, ValueError):
            pass


def _compiled(name: str) -> tuple[str, StatusKey, bytes] | None:
    """A module imported the usual way from its source: its source, that source's status, its code; else None."""
    module = sys.modules.get(name)
    spec = getattr(module, "__spec__", None)
    if spec is None or spec.submodule_search_locations is not None or not isinstance(spec.loader, SourceFileLoader):
        return None  # a package, or a module that was not read from a .py file
    source = spec.origin
    try:
        before = os.stat(source)
        code = spec.loader.get_code(name)  # the .pyc Python keeps, or the source compiled
        after = os.stat(source)
    except Exception:  # unreadable, or not compiling now: not kept
        return None
    if code is None or status_key(before) != status_key(after) or after.st_mtime_ns > time.time_ns() - RECENT_NS:
        return None
    return source, status_key(after), marshal.dumps(code)


def _well_formed(name: Any, entry: Any) -> bool:
    return (isinstance(name, str) and name.startswith(PACKAGE) and isinstance(entry, tuple) and len(entry) == 3
            and isinstance(entry[0], str) and isinstance(entry[1], tuple) and isinstance(entry[2], bytes))


def keep_modules(args: list[str]) -> None:
    """Read toolrun's modules from the cache folder's file for the command ``args`` run (see the module's docstring)."""
    folder = cache_directory()
    if folder is None:
        return
    package_folder = toolrun.__path__[0]  # as the import system names the submodules' sources
    toolrun_key = f"{crc32(package_folder.encode('utf-8', 'surrogatepass')):08x}"  # which toolrun: its folder
    python = f"{sys.implementation.cache_tag}-{MAGIC_NUMBER.hex()}"
    name = f"modules-{command_name(args)}-{toolrun_key}-{python}-{FILE_FORMAT}.marshal"
    ModuleBundle(folder / name, package_folder).install()
