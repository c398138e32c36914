"""Where toolrun keeps what it can work out again: the catalog and recipe caches, and bytecode.

``$TOOLRUN_CACHE_DIR``, else ``$XDG_CACHE_HOME/toolrun``, else ``~/.cache/toolrun``;
``TOOLRUN_CACHE_DIR=off`` turns every cache off. Deleting the folder is always safe.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import time
from collections.abc import Iterator
from importlib.machinery import SourceFileLoader  # imported by Python's own start (site)
from pathlib import Path
from types import CodeType

# False once the toolrun script has turned bytecode writing on for its own modules although the
# user turned it off (PYTHONDONTWRITEBYTECODE): the modules of python tools are still imported
# without writing any (an edit within the same second could otherwise run the old code).
users_modules_write_bytecode = True
PRUNE_STAMP = "pruned"  # in the cache folder: its modification time is when the folder was last pruned
PRUNE_EVERY_S = 86_400.0


def cache_directory() -> Path | None:
    """toolrun's cache folder; None when ``TOOLRUN_CACHE_DIR=off``."""
    configured = os.environ.get("TOOLRUN_CACHE_DIR")
    if configured:
        return None if configured.lower() == "off" else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolrun"


def keep_bytecode() -> None:
    """When Python may not write bytecode beside the sources (``PYTHONDONTWRITEBYTECODE``), keep
    the bytecode of the modules imported from now on in ``bytecode/`` of the cache folder
    (Python's own ``sys.pycache_prefix``); the toolrun script calls this first, so that only the
    few small modules before it are compiled on every run. A prefix of the user's own is kept."""
    global users_modules_write_bytecode
    if not sys.dont_write_bytecode or sys.pycache_prefix is not None:
        return
    folder = cache_directory()
    if folder is None:
        return
    sys.pycache_prefix = str(folder / "bytecode")
    sys.dont_write_bytecode = False
    users_modules_write_bytecode = False  # python tools' modules: as the user said
    # Python trusts a .pyc while the source's mtime in whole seconds and its size are unchanged: a
    # same-size edit whose mtime was set back (touch -r, cp -p) would run the old code, where without
    # the cache it was compiled afresh. Every .pyc is in the cache folder now, whatever finder loads it.
    SourceFileLoader.path_stats = path_stats_by_status  # type: ignore[method-assign,assignment]
    SourceFileLoader.get_code = code_from_sound_bytecode  # type: ignore[method-assign,assignment]


_get_code = SourceFileLoader.get_code


def code_from_sound_bytecode(loader: SourceFileLoader, fullname: str) -> CodeType | None:
    """A source loader's ``get_code`` that compiles the source again when its bytecode in the cache folder is
    damaged (cut short by a crash or a full disk, a byte changed): Python's own reads such a file, fails with
    ``EOFError: marshal data too short`` or ``ValueError: bad marshal data``, and every command would fail so
    until the folder was deleted."""
    try:
        return _get_code(loader, fullname)
    except (EOFError, ValueError, TypeError):
        from importlib.util import cache_from_source

        with contextlib.suppress(OSError, ValueError, NotImplementedError):
            os.unlink(cache_from_source(loader.get_filename(fullname)))
        return _get_code(loader, fullname)  # a mistake of the source itself is raised again, as it would be


def path_stats_by_status(loader: SourceFileLoader, path: str) -> dict[str, int]:
    """A source loader's ``path_stats`` whose "mtime" stands for the file's size, both times in
    nanoseconds and its inode: its bytecode is used only while its whole status is unchanged
    (any write changes the ctime, which no tool can set back)."""
    status = os.stat(path)
    # a tuple of ints hashes the same in every process (only str and bytes hashes are salted)
    stamp = hash((status.st_size, status.st_mtime_ns, status.st_ctime_ns, status.st_ino)) & 0xFFFFFFFF
    return {"mtime": stamp, "size": status.st_size}


@contextlib.contextmanager
def importing_users_code() -> Iterator[None]:
    """Import a python tool's module with the bytecode setting the user chose."""
    if users_modules_write_bytecode:
        yield
        return
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = False


def prune_when_due(now: float | None = None) -> bool:
    """When a day has passed since the cache folder was last pruned (one ``stat``), prune it as this process
    ends: what no tools folder, recipe or source uses any more goes (``toolrun.core.cache_prune``). Whether it will."""
    folder = cache_directory()
    if folder is None:
        return False
    try:
        last = os.stat(folder / PRUNE_STAMP).st_mtime
    except FileNotFoundError:
        due = os.path.isdir(folder)  # a folder made just now has nothing to prune yet
    except OSError:
        due = False
    else:  # a stamp a day or more ahead: the clock was set back since (it had run ahead), not a pruning to come
        due = not -PRUNE_EVERY_S < (time.time() if now is None else now) - last < PRUNE_EVERY_S
    if due:
        atexit.register(_prune, folder)
    return due


def _prune(folder: Path) -> None:
    # The command's own outcome stands, whatever pruning meets, and it prints nothing: an error, Ctrl-C pressed
    # while it works (it stops there; the stamp is made, so the next pruning is a day later), an install changed
    # while the command ran (nothing left to import).
    with contextlib.suppress(Exception, KeyboardInterrupt):
        from toolrun.core.cache_prune import prune_cache_folder  # once a day: not imported by the other runs

        prune_cache_folder(folder)
