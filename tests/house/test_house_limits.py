"""Limits that keep the house light, read from the source: no module over 600 lines, no
function over 60 lines, none of cyclomatic complexity over 20 (radon's measure).

``OVER_TODAY`` names what exceeds a limit now, each with its figure; it may only shrink: an
entry that no longer exceeds its limit fails too, so the list is kept true."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from radon.complexity import cc_visit_ast

import toolrun
from tests.package_sources import SOURCES_GROUP, parsed_source

PACKAGE_ROOT = Path(toolrun.__file__).resolve().parent
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 60
MAX_COMPLEXITY = 20

# "path:function" (or "path" for a module) -> what it measures today
OVER_TODAY: dict[str, str] = {}


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.append((prefix + node.name, node))
            found += _functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            found += _functions(node, prefix + node.name + ".")
    return found


def over_the_limits(root: Path) -> dict[str, str]:
    """Every module, function and method of the package under ``root`` that exceeds a limit."""
    over: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        text, tree = parsed_source(path)  # radon measures the same tree
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            over[where] = f"{lines} lines"
        complexity = {}
        for block in cc_visit_ast(tree):
            complexity[block.fullname] = block.complexity
            for method in getattr(block, "methods", []):
                complexity[method.fullname] = method.complexity
        for name, node in _functions(tree):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            figures = []
            if complexity.get(name, 0) > MAX_COMPLEXITY:
                figures.append(f"complexity {complexity[name]}")
            if length > MAX_FUNCTION_LINES:
                figures.append(f"{length} lines")
            if figures:
                over[f"{where}:{name}"] = ", ".join(figures)
    return over


@pytest.mark.xdist_group(SOURCES_GROUP)
def test_nothing_new_exceeds_the_limits_and_the_list_of_what_does_is_true() -> None:
    over = over_the_limits(PACKAGE_ROOT)
    new = {name: figure for name, figure in over.items() if name not in OVER_TODAY}
    assert not new, f"over the limits (split it, or name a part of it by what it does): {new}"
    gone = sorted(set(OVER_TODAY) - set(over))
    assert not gone, f"no longer over the limits — remove from OVER_TODAY: {gone}"


def test_the_limits_are_measured(tmp_path: Path) -> None:
    branches = "".join(f"    if x == {i}:\n        return {i}\n" for i in range(21))
    (tmp_path / "big.py").write_text("def tangled(x):\n" + branches + "\n" * 600, encoding="utf-8")
    (tmp_path / "small.py").write_text("class A:\n    def fine(self):\n        return 1\n", encoding="utf-8")
    assert over_the_limits(tmp_path) == {"big.py": f"{43 + 600} lines", "big.py:tangled": "complexity 22"}
