"""Where toolrun keeps what it can work out again: the catalog and recipe caches, and bytecode.

``$TOOLRUN_CACHE_DIR``, else ``$XDG_CACHE_HOME/toolrun``, else ``~/.cache/toolrun``;
``TOOLRUN_CACHE_DIR=off`` turns every cache off. Deleting the folder is always safe.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

# False once the toolrun script has turned bytecode writing on for its own modules although the
# user turned it off (PYTHONDONTWRITEBYTECODE): the modules of python tools are still imported
# without writing any (an edit within the same second could otherwise run the old code).
users_modules_write_bytecode = True


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
    from toolrun.core.bytecode_check import check_bytecode_by_status  # its own bytecode is kept: not compiled each run

    check_bytecode_by_status()


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
