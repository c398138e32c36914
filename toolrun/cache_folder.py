"""Where toolrun keeps what it can work out again: the catalog and recipe caches, and bytecode.

``$TOOLRUN_CACHE_DIR``, else ``$XDG_CACHE_HOME/toolrun``, else ``~/.cache/toolrun``;
``TOOLRUN_CACHE_DIR=off`` turns every cache off. Deleting the folder is always safe.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_directory() -> Path | None:
    """toolrun's cache folder; None when ``TOOLRUN_CACHE_DIR=off``."""
    configured = os.environ.get("TOOLRUN_CACHE_DIR")
    if configured:
        return None if configured.lower() == "off" else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolrun"
