"""Python sources read and parsed once per test process.

Several house tests walk the tree of every module of the package (layering, limits, lazy imports,
docstrings, dataclasses); parsing the package costs about half a CPU second each time. They share
the xdist group ``SOURCES_GROUP`` so that one worker runs them all and parses each module once.
The trees are shared: a test reads them and never changes them.
"""

from __future__ import annotations

import ast
import functools
import gc
from pathlib import Path

SOURCES_GROUP = "package-sources"  # pytest.mark.xdist_group of every test that walks the whole package


@functools.cache
def _parse(filename: str, text: str) -> ast.Module:
    # Kept trees would be scanned by each collection the parse triggers (it doubles the parse's cost);
    # a tree holds no cycle worth collecting.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(text, filename=filename)
    finally:
        if collecting:
            gc.enable()


def parsed_source(path: Path) -> tuple[str, ast.Module]:
    """The text of ``path`` and its tree; the same tree again while the text has not changed."""
    text = path.read_text(encoding="utf-8")
    return text, _parse(str(path), text)


def parsed_tree(path: Path) -> ast.Module:
    return parsed_source(path)[1]
