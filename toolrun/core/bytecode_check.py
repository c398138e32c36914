"""Bytecode kept in toolrun's cache folder is used only while its source's whole status is unchanged.

Python checks a ``.pyc`` against the source's mtime in whole seconds and its size, so a same-size
edit within one second, or one whose mtime was kept (``cp -p``, ``touch -r``), runs the old code.
Where Python may not write bytecode (``PYTHONDONTWRITEBYTECODE``) every import compiles afresh
and that cannot happen; once ``keep_bytecode`` keeps bytecode in the cache folder it could, so the
modules imported from then on are checked by ``StatusCheckedLoader``. This module itself, imported
just before, is the one checked as Python checks any ``.pyc``.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import (
    BYTECODE_SUFFIXES,
    EXTENSION_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionFileLoader,
    FileFinder,
    SourceFileLoader,
    SourcelessFileLoader,
)


class StatusCheckedLoader(SourceFileLoader):
    """Loads a module from its source file; the "mtime" its bytecode is checked against stands for the
    size, both times in nanoseconds and the inode: any write changes the ctime, which no tool can set back."""

    def path_stats(self, path: str) -> dict[str, int]:
        status = os.stat(path)
        # a tuple of ints hashes the same in every process (only str and bytes hashes are salted)
        stamp = hash((status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)) & 0xFFFFFFFF
        return {"mtime": stamp, "size": status.st_size}


def check_bytecode_by_status() -> None:
    """Modules imported from now on from source files are loaded by ``StatusCheckedLoader``."""
    hook = FileFinder.path_hook((ExtensionFileLoader, EXTENSION_SUFFIXES), (StatusCheckedLoader, SOURCE_SUFFIXES),
                                (SourcelessFileLoader, BYTECODE_SUFFIXES))
    sys.path_hooks.insert(0, hook)
    for entry, finder in list(sys.path_importer_cache.items()):  # the folders looked in so far
        if type(finder) is not FileFinder:
            continue
        loaders = getattr(finder, "_loaders", None)  # CPython's (3.3 to 3.14 at least): the folder's listing is kept
        if isinstance(loaders, list):
            finder._loaders = [(suffix, StatusCheckedLoader if loader is SourceFileLoader else loader)  # type: ignore[attr-defined]
                               for suffix, loader in loaders]
            continue
        try:  # found again, and the folder listed again (1.2M instructions on a replayed recipe)
            sys.path_importer_cache[entry] = hook(entry)
        except ImportError:  # no longer a folder
            del sys.path_importer_cache[entry]
