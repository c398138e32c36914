"""The ranking index of a tools directory, kept beside its catalog cache: ``toolrun tools select``
on an unchanged catalog neither loads the catalog nor indexes it again (1,100 tools: ~0.4 s of
CPU each time, the most of that command).

One ``.ranking`` file per directory holds the index (``ToolIndex.state``), the counts the load
summary says, and what it was made from: the code stamp, each tool file by its path inside the
directory with its status key, and each file the tools' checks read with its own — the stamps
the catalog cache keys its entries by (size, mtime and ctime in nanoseconds, inode: a same-size
edit with the mtime set back still changes the ctime). It is written only after a checked load
in which the catalog cache held every file, with no problem, no notice and no lint error, so a
hit is what that load would give again. Anything else is a miss and the catalog is loaded: a
file added, gone or changed, other code, a damaged or foreign file (its digest does not match).
"""

from __future__ import annotations

import contextlib
import marshal
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from toolrun.catalog.cache import CatalogCache, cache_file, catalog_code_stamp, checked, digest, replace_file, status_key
from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.loader import tool_files
from toolrun.catalog.model import Catalog
from toolrun.catalog.tool_ranking import ToolIndex
from toolrun.core.cache_folder import cache_directory

SUFFIX = ".ranking"


@dataclass(frozen=True)
class KeptRanking:
    """A kept index and what the load it came from counted (for the summary line)."""

    index: ToolIndex
    warnings: int  # the lint's, as the load that made the index counted them (errors would have stopped it)


def kept_ranking(directory: Path) -> KeptRanking | None:
    """The index kept for ``directory`` when nothing it was made from changed since; else None."""
    folder = cache_directory()
    if folder is None or not directory.is_dir():
        return None
    try:
        stamp, stamps, warnings, state = marshal.loads(checked(cache_file(directory, folder, SUFFIX).read_bytes()))
        if stamp != catalog_code_stamp() or stamps != _stamps_now(directory, stamps):
            return None
        return KeptRanking(ToolIndex.from_state(state), int(warnings))
    except (OSError, EOFError, ValueError, TypeError):
        return None


def _stamps_now(directory: Path, kept: tuple[tuple[str, tuple[int, ...]], ...]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The directory's tool files by key with their status keys now, then the other files ``kept`` names."""
    key = CatalogCache(directory, None).key  # keys only: a cache without a folder reads nothing
    files = tool_files(directory)
    stamps = [(key(file), status_key(os.stat(file))) for file in files]
    stamps += [(path, status_key(os.stat(path))) for path, _ in kept[len(files):]]
    return tuple(stamps)


def load_ranking_index(directory: Path, *, on_loaded: Callable[[Catalog], None],
                       on_kept: Callable[[int, int], None]) -> ToolIndex:
    """The ranking index of ``directory``'s catalog: the kept one when nothing changed (``on_kept`` gets its tool
    count and the warnings the load counted), else the catalog loaded and checked (``on_loaded`` sees it; a ``LoadError``
    is raised as by ``load_checked_catalog``), indexed, and kept for next time."""
    kept = kept_ranking(directory)
    if kept is not None:
        on_kept(len(kept.index.names), kept.warnings)
        return kept.index
    cache = CatalogCache.for_directory(directory)
    # No side-by-side rules, as for `tools list`: they are about a set of tools offered together.
    catalog = load_checked_catalog(directory, on_loaded=on_loaded, lint_together=None, cache=cache)
    index = ToolIndex.of_tools(catalog)
    keep_ranking(directory, catalog, cache, index)
    return index


def keep_ranking(directory: Path, catalog: Catalog, cache: CatalogCache, index: ToolIndex) -> None:
    """Keep ``index`` of ``catalog`` (just loaded from ``directory`` through ``cache``) when the cache vouches
    for every file."""
    folder = cache_directory()
    if folder is None or catalog.problems or catalog.notices or catalog.unstarted or catalog.lint_errors:
        return
    stamps = cache.kept_stamps([str(file) for file in tool_files(directory)])
    if stamps is None:
        return
    warnings = sum(1 for finding in catalog.findings if finding.severity == "warning" and not finding.ignored)
    data = marshal.dumps((catalog_code_stamp(), stamps, warnings, index.state()))
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        replace_file(cache_file(directory, folder, SUFFIX), digest(data) + data)
