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
