"""Keeping the cache folder from growing without end: what nothing uses any more is removed.

Every tools folder, recipe and MCP server toolrun has met leaves a few small files in the cache
folder, and with ``PYTHONDONTWRITEBYTECODE`` set the ``bytecode/`` tree holds the bytecode of every
module each toolrun imported, under the path of its source: a checkout or virtual environment in a
temporary folder, removed long ago, left megabytes there for good. At most once a day, as a
toolrun command ends (``toolrun.core.cache_folder.prune_when_due``), the folder is pruned:

- in ``bytecode/``, a ``.pyc`` whose source file is gone (a whole folder of them when the source
  folder is gone), then the folders left empty;
- at the top, toolrun's own cache files (``catalog-…``, ``recipe-…``, ``mcp-tools-…`` …) that
  nothing has read or written for ``UNUSED_FOR_S``, and temporary files a writer left a day ago.
  "Read" is the file's access time, which Linux keeps to the day by default (``relatime``); where
  it is not kept (``noatime``), a file still in use may go, and is made again at its next use.

Nothing else is touched: the folder may be one the user chose, holding files of their own (a
``bytecode`` that is a link, or a ``__pycache__`` folder in it, is not Python's tree: left as it is).
A file that cannot be removed is left; two toolruns pruning at once each skip what the other removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from toolrun.core.cache_folder import PRUNE_STAMP

UNUSED_FOR_S = 30 * 86_400.0
LEFT_TEMPORARY_S = 86_400.0  # a writer's temporary file older than this was left by one that stopped
# What toolrun writes at the top of the folder (and what earlier versions wrote), by its exact form: nothing else.
OWN_FILE = re.compile(r"catalog-[0-9a-f]{24}\.[a-z]+|(recipe|script)-[0-9a-f]{24}\.marshal|mcp-tools-[0-9a-f]{24}\.json"
                      r"|(dataclass-code|modules)-[\w.-]+\.marshal")
TEMPORARY_FILE = re.compile(r"\.[\w.-]+\.[0-9a-f]{12}\.tmp")  # toolrun.core.private_files.replace_file's
BYTECODE = re.compile(r"([^.]+)\.[\w-]+(\.opt-\d+)?\.pyc")  # "mod.cpython-311.pyc": the source is mod.py


@dataclass
class Pruned:
    """What one pruning removed."""

    files: int = 0
    bytes: int = 0


def prune_cache_folder(folder: Path, now: float | None = None) -> Pruned:
    """Remove from ``folder`` what nothing uses any more (see the module's docstring); stamp it pruned first,
    so that the toolruns ending while this one works do not start the same pruning."""
    now = time.time() if now is None else now
    pruned = Pruned()
    if not _stamped(folder / PRUNE_STAMP):
        return pruned  # a folder that cannot be written is not pruned either
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            _prune_top_file(entry, now, pruned)
    # The prefix's layout below is the POSIX one: /a/b/c.py -> bytecode/a/b/c.<tag>.pyc. A link is not followed:
    # what it leads to (a project, its __pycache__ folders) is not the tree Python wrote there.
    if os.name == "posix" and _is_folder(folder / "bytecode"):
        _prune_bytecode(folder / "bytecode", Path("/"), pruned)
    return pruned


def _prune_top_file(entry: os.DirEntry[str], now: float, pruned: Pruned) -> None:
    if OWN_FILE.fullmatch(entry.name):
        unused_for = UNUSED_FOR_S
    elif TEMPORARY_FILE.fullmatch(entry.name):
        unused_for = LEFT_TEMPORARY_S
    else:
        return
    try:
        status = entry.stat(follow_symlinks=False)
    except OSError:
        return
    if entry.is_file(follow_symlinks=False) and now - max(status.st_atime, status.st_mtime) >= unused_for:
        _remove(entry.path, status.st_size, pruned)


def _prune_bytecode(folder: Path, source_folder: Path, pruned: Pruned) -> bool:
    """Prune the bytecode of ``source_folder`` kept in ``folder``; whether ``folder`` is empty now (and removed)."""
    source_there = os.path.isdir(source_folder)  # False also when it cannot be seen: then neither can Python
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return False
    left = len(entries)
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            if entry.name == "__pycache__":  # never a source folder: a tree of someone else's (a package named bytecode)
                continue
            if _prune_bytecode(Path(entry.path), source_folder / entry.name, pruned):
                left -= 1
            continue
        found = BYTECODE.fullmatch(entry.name)
        if found is None or not entry.is_file(follow_symlinks=False):
            continue  # not bytecode Python wrote: not ours to remove
        stem = found.group(1)
        if source_there and any(os.path.exists(source_folder / f"{stem}{suffix}") for suffix in (".py", ".pyw")):
            continue
        try:
            size = entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
        if _remove(entry.path, size, pruned):
            left -= 1
    if left:
        return False
    try:
        os.rmdir(folder)
    except OSError:
        return False
    return True


def _stamped(stamp: Path) -> bool:
    """Whether ``stamp`` now says the folder was pruned just now. A link of that name is not followed (it is not
    toolrun's: nothing is pruned), and one another user left (a ``sudo -E`` run) is replaced, or pruning would
    never be due again: the folder is this user's."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        try:
            descriptor = os.open(stamp, flags, 0o600)
        except PermissionError:
            os.unlink(stamp)
            descriptor = os.open(stamp, flags | os.O_EXCL, 0o600)
    except OSError:
        return False
    try:
        os.utime(descriptor if os.utime in os.supports_fd else stamp)
    except OSError:
        return False
    finally:
        os.close(descriptor)
    return True


def _is_folder(path: Path) -> bool:
    """Whether ``path`` is a folder itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _remove(path: str, size: int, pruned: Pruned) -> bool:
    try:
        os.unlink(path)
    except OSError:
        return False
    pruned.files += 1
    pruned.bytes += size
    return True
