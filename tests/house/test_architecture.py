"""The layering of the toolrun package, read from its source: who may import whom.

Every ``import`` statement of every module counts, wherever it stands: at the top, inside
a function (a lazy import is still a dependency) and under ``if TYPE_CHECKING:`` (a type
from above is still knowledge of above). The layers, top to bottom (``LAYERS``), each a folder of the package:

    cli/ > features (mcp/, openapi/, batch/, runlog/, view/) > the public face (toolrun, api, export, plugins)
         > sessions/ (play, ask, chat, recipe, ...) > loop/ (runner, execution, ...)
         > replay/ > providers/ > catalog/ > backends/ > core/ (the base)

A module imports only modules of its own layer or below; the NEVER rules also name the
steps the architecture forbids outright (Backends -> Catalog, Catalog -> Providers, ...).

A failure names the file, the line, the importing module and what it imports.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest

import toolrun
from tests.package_sources import SOURCES_GROUP, parsed_tree

pytestmark = pytest.mark.xdist_group(SOURCES_GROUP)  # --dist loadgroup: the package is parsed once, on one worker
PACKAGE_ROOT = Path(toolrun.__file__).resolve().parent

# The modules everything else stands on: the core/ package. A checker test may name others.
BASE_PACKAGE = "toolrun.core"
# What toolrun/ itself holds: the public face, and export.py (it asks every adapter, so it stands above them).
FACE = frozenset({"toolrun", "toolrun.__main__", "toolrun.api", "toolrun.export", "toolrun.plugins"})


def is_base(module: str, base: Iterable[str] | None = None) -> bool:
    if base is not None:
        return module in set(base)
    return module == BASE_PACKAGE or module.startswith(BASE_PACKAGE + ".")


PACKAGES = ("cli", "catalog", "backends", "providers")


@dataclass(frozen=True)
class Import:
    """One import statement's target inside the package, and where it was written."""

    importer: str
    imported: str
    file: Path
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.importer} imports {self.imported}"


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Every module of the package under ``root``: dotted name -> file."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``from ... import`` names, relative imports included."""
    if not node.level:
        return node.module or ""
    anchor = importer.split(".")
    anchor = anchor if is_package else anchor[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join([*anchor, node.module] if node.module else anchor)


def imports_in(root: Path, package: str) -> list[Import]:
    """Every import of a module of ``package`` by a module of ``package``, at any depth of the code."""
    modules = module_names(root, package)
    found = []
    for importer, path in modules.items():
        tree = parsed_tree(path)
        where = path.relative_to(root.parent)
        for node in ast.walk(tree):  # every statement: module level, functions, TYPE_CHECKING blocks
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(importer, path.name == "__init__.py", node)
                # "from toolrun.catalog import lint_rules" imports the submodule, not just the package
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in dict.fromkeys(targets):
                if target == package or target.startswith(package + "."):
                    found.append(Import(importer, target, where, node.lineno))
    return found


def part_of(module: str, package: str = "toolrun", base: Iterable[str] | None = None) -> str:
    """The architectural part a module belongs to: api, cli, catalog, backends, providers, base, other."""
    if module == package:
        return "api"
    if module == f"{package}.__main__":  # ``python -m toolrun``: the command line's other door
        return "cli"
    first = module.split(".")[1]
    if first in PACKAGES:
        return first
    return "base" if is_base(module, base) else "other"


@dataclass(frozen=True)
class Never:
    """A dependency that must never exist, and why."""

    name: str
    breaks: Callable[[str, str], bool]  # (importer's part, imported's part) -> forbidden?
    why: str


NEVER_RULES = [
    Never("backends-to-catalog", lambda a, b: a == "backends" and b == "catalog",
          "Backends -> Catalog: a backend checks its own config; the catalog asks it"),
    Never("backends-to-providers", lambda a, b: a == "backends" and b == "providers",
          "Backends -> Providers: tools know nothing of models"),
    Never("providers-to-backends", lambda a, b: a == "providers" and b == "backends",
          "Providers -> Backends: models know nothing of how tools run"),
    Never("catalog-to-providers", lambda a, b: a == "catalog" and b == "providers",
          "Catalog -> Providers: a tool's wire shape belongs to its adapter"),
    Never("base-to-above", lambda a, b: a == "base" and b != "base",
          "Base -> anything above it: the base (core/) is below everything"),
    Never("anything-to-cli", lambda a, b: a != "cli" and b == "cli",
          "anything below cli/ -> cli/: the core prints nothing, a server has no terminal"),
    Never("providers-to-catalog", lambda a, b: a == "providers" and b == "catalog",
          "Providers -> Catalog: an adapter owns its wire shape; the JSON-Schema dialects are in the base"),
]


def violations(imports: Iterable[Import], rule: Never, package: str = "toolrun",
               base: Iterable[str] | None = None) -> list[str]:
    return [f"{found} — {rule.why}" for found in imports
            if rule.breaks(part_of(found.importer, package, base), part_of(found.imported, package, base))]


def package_cycles(imports: Iterable[Import], parts: tuple[str, ...], package: str = "toolrun") -> list[str]:
    """Each cycle between the given parts, spelled with one import that makes each of its edges."""
    edges: dict[str, dict[str, Import]] = defaultdict(dict)
    for found in imports:
        source, target = part_of(found.importer, package), part_of(found.imported, package)
        if source != target and source in parts and target in parts:
            edges[source].setdefault(target, found)
    cycles: list[str] = []

    def walk(path: list[str]) -> None:
        for target in sorted(edges[path[-1]]):
            if target == path[0] and path[0] == min(path):  # report each cycle once, from its smallest part
                steps = [*path, target]
                witnesses = "; ".join(str(edges[a][b]) for a, b in pairwise(steps))
                cycles.append(f"{' -> '.join(steps)} ({witnesses})")
            elif target not in path:
                walk([*path, target])

    for part in sorted(edges):
        walk([part])
    return cycles


@pytest.fixture(scope="module")
def toolrun_imports() -> list[Import]:
    return imports_in(PACKAGE_ROOT, "toolrun")


# ---------------------------------------------------------------- the rules, on toolrun itself

# A rule that only holds once other work lands is marked here with the reason; strict xfail
# turns into a failure the day it starts passing, so the mark is removed then.
EXPECTED_TO_FAIL: dict[str, str] = {}


def _rule_params() -> list:
    return [
        pytest.param(rule, id=rule.name, marks=[pytest.mark.xfail(strict=True, reason=EXPECTED_TO_FAIL[rule.name])]
                     if rule.name in EXPECTED_TO_FAIL else [])
        for rule in NEVER_RULES
    ]


@pytest.mark.parametrize("rule", _rule_params())
def test_never(rule: Never, toolrun_imports: list[Import]) -> None:
    found = violations(toolrun_imports, rule)
    assert not found, f"{len(found)} forbidden import(s):\n" + "\n".join(found)


FEATURES = frozenset({"mcp", "openapi", "batch", "runlog", "view"})


def _in(folder: str) -> Callable[[str], bool]:
    return lambda m: m == f"toolrun.{folder}" or m.startswith(f"toolrun.{folder}.")


LAYERS: list[tuple[str, Callable[[str], bool]]] = [  # bottom first
    ("base", _in("core")),
    ("backends", _in("backends")),
    ("catalog", _in("catalog")),
    ("providers", _in("providers")),
    ("replay", _in("replay")),
    ("run", _in("loop")),
    ("sessions", _in("sessions")),
    ("api", lambda m: m in FACE - {"toolrun.__main__"}),
    ("features", lambda m: m.count(".") >= 1 and m.split(".")[1] in FEATURES),
    ("cli", lambda m: m.startswith("toolrun.cli") or m == "toolrun.__main__"),
]


def layer_of(module: str) -> tuple[int, str] | None:
    """The layer of ``module`` (its rank, bottom 0, and its name); None for a module no layer claims."""
    for rank, (name, claims) in enumerate(LAYERS):
        if claims(module):
            return rank, name
    return None


def upward_imports(imports: Iterable[Import]) -> list[str]:
    """Each import of a module from a higher layer, spelled with where it is."""
    found = []
    for imp in imports:
        source, target = layer_of(imp.importer), layer_of(imp.imported)
        if source is not None and target is not None and target[0] > source[0]:
            found.append(f"{imp} — {source[1]} imports {target[1]}, which stands above it")
    return found


def test_every_module_belongs_to_a_layer() -> None:
    unclaimed = [module for module in module_names(PACKAGE_ROOT, "toolrun") if layer_of(module) is None]
    assert not unclaimed, f"modules no layer claims (add each to LAYERS, where it stands): {unclaimed}"


def test_every_import_points_down_the_layers(toolrun_imports: list[Import]) -> None:
    found = upward_imports(toolrun_imports)
    assert not found, f"{len(found)} import(s) against the layering:\n" + "\n".join(found)


def test_the_layer_check_catches_an_upward_import() -> None:
    planted = [Import("toolrun.backends.shell", "toolrun.loop.runner", Path("toolrun/backends/shell.py"), 3),
               Import("toolrun.catalog.loader", "toolrun.replay.playback", Path("toolrun/catalog/loader.py"), 9),
               Import("toolrun.loop.runner", "toolrun.catalog.model", Path("toolrun/loop/runner.py"), 1)]
    found = upward_imports(planted)
    assert len(found) == 2 and "backends imports run" in found[0] and "catalog imports replay" in found[1]


def test_no_import_cycles_between_catalog_backends_and_providers(toolrun_imports: list[Import]) -> None:
    cycles = package_cycles(toolrun_imports, ("catalog", "backends", "providers"))
    assert not cycles, "import cycles between packages:\n" + "\n".join(cycles)


def test_the_package_folder_holds_only_the_public_face() -> None:
    loose = {module for module in module_names(PACKAGE_ROOT, "toolrun") if module.count(".") == 1
             and not (PACKAGE_ROOT / module.split(".")[1]).is_dir()} | {"toolrun"}
    assert loose == FACE, f"modules lying loose in toolrun/ (each belongs in a layer's folder): {sorted(loose - FACE)}"


def test_the_scan_sees_lazy_imports_and_the_whole_package(toolrun_imports: list[Import]) -> None:
    # The catalog asks a backend to check its config inside a function: that import must be seen.
    lazy = [i for i in toolrun_imports if i.importer == "toolrun.catalog.lint_rules" and i.imported == "toolrun.backends"]
    assert lazy, "the function-level import in catalog/lint_rules.py was not found"
    importers = {i.importer for i in toolrun_imports}
    assert {"toolrun.loop.runner", "toolrun.cli.recipe", "toolrun.backends.http", "toolrun.catalog.loader"} <= importers


# ---------------------------------------------------------------- the checker, on a small package


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_checker_names_the_offending_module_and_import(tmp_path: Path) -> None:
    root = tmp_path / "toolrun"
    _write(root, {
        "__init__.py": "",
        "core/text.py": "def helper():\n    from toolrun.loop.runner import run\n",  # Base reaching up, lazily
        "loop/runner.py": "from toolrun.core import text\n",
        "catalog/__init__.py": "",
        "catalog/model.py": "from ..providers import openai\n",  # relative
        "backends/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from toolrun.catalog.model import X\n",
        "providers/__init__.py": "",
        "providers/openai.py": "import toolrun.backends\nfrom toolrun.cli import main\n",
        "cli/__init__.py": "from toolrun.loop.runner import run\n",
    })
    imports = imports_in(root, "toolrun")
    found = {rule.name: violations(imports, rule, base={"toolrun.core.text"}) for rule in NEVER_RULES}
    assert found["base-to-above"] == [
        "toolrun/core/text.py:2: toolrun.core.text imports toolrun.loop.runner — " + NEVER_RULES[4].why]
    assert found["catalog-to-providers"][0].startswith(
        "toolrun/catalog/model.py:1: toolrun.catalog.model imports toolrun.providers.openai — ")
    assert found["backends-to-catalog"][0].startswith(
        "toolrun/backends/__init__.py:3: toolrun.backends imports toolrun.catalog.model — ")
    assert found["providers-to-backends"][0].startswith(
        "toolrun/providers/openai.py:1: toolrun.providers.openai imports toolrun.backends — ")
    assert found["anything-to-cli"][0].startswith(
        "toolrun/providers/openai.py:2: toolrun.providers.openai imports toolrun.cli — ")
    assert found["backends-to-providers"] == []
    cycles = package_cycles(imports, ("catalog", "backends", "providers"))
    assert cycles == ["backends -> catalog -> providers -> backends ("
                      "toolrun/backends/__init__.py:3: toolrun.backends imports toolrun.catalog.model; "
                      "toolrun/catalog/model.py:1: toolrun.catalog.model imports toolrun.providers.openai; "
                      "toolrun/providers/openai.py:1: toolrun.providers.openai imports toolrun.backends)"]


def test_the_checker_forbids_a_provider_reaching_into_the_catalog(tmp_path: Path) -> None:
    # The arrow that went with the dialects' move to the base: a lazy, relative import still counts.
    root = tmp_path / "toolrun"
    _write(root, {
        "__init__.py": "",
        "core/schema_dialects.py": "",
        "catalog/__init__.py": "",
        "catalog/schema_convert.py": "",
        "providers/__init__.py": "",
        "providers/openai_family.py": "def strict():\n    from ..catalog.schema_convert import to_openai_strict\n",
        "providers/gemini.py": "from toolrun.core.schema_dialects import to_gemini\n",
    })
    rule = next(rule for rule in NEVER_RULES if rule.name == "providers-to-catalog")
    found = violations(imports_in(root, "toolrun"), rule, base={"toolrun.core.schema_dialects"})
    assert found == ["toolrun/providers/openai_family.py:2: toolrun.providers.openai_family imports "
                     "toolrun.catalog.schema_convert — " + rule.why]


# ---------------------------------------------------------------- the catalog asks backends, never names them

BUILT_IN_BACKENDS = frozenset({"http", "shell", "python", "mcp_server"})
# (module, name) pairs that still compare against a built-in's name, each with the reason it stays.
BACKEND_NAMES_ALLOWED = {
    ("toolrun.catalog.tool_builder", "http"): "per-backend file defaults and the toolset credentials they carry: not yet behind Backend",
    ("toolrun.catalog.tool_builder", "shell"): "per-backend file defaults: not yet behind Backend",
    ("toolrun.catalog.tool_builder", "python"): "the `python: mod:func` shorthand of the YAML file format",
    ("toolrun.catalog.cache", "http"): "which backends' load-time checks read only the tool file: not yet behind Backend",
    ("toolrun.catalog.cache", "shell"): "which backends' load-time checks read only the tool file: not yet behind Backend",
    ("toolrun.catalog.cache", "python"): "the python backend's source file, for the cache's staleness check",
    ("toolrun.catalog.loader", "mcp_server"): "an mcp_server toolset file is a file format of its own (its top-level key)",
    ("toolrun.catalog.mcp_toolset", "mcp_server"): "the mcp_server toolset file format: it builds mcp_server tools",
}


def backend_names_in(root: Path, package: str, folder: str) -> list[tuple[str, str, str]]:
    """(module, name, where) for each string literal of a built-in backend's name in the folder's modules."""
    found = []
    for module, path in module_names(root / folder, f"{package}.{folder}").items():
        tree = parsed_tree(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in BUILT_IN_BACKENDS:
                found.append((module, node.value, f"{path.relative_to(root.parent)}:{node.lineno}"))
    return found


def test_the_catalog_does_not_name_built_in_backends() -> None:
    found = [f"{where}: {module} names the backend {name!r} — ask the Backend interface instead (parse, check, "
             "warnings, arguments_through_templates)" for module, name, where in backend_names_in(
                 PACKAGE_ROOT, "toolrun", "catalog") if (module, name) not in BACKEND_NAMES_ALLOWED]
    assert not found, "\n".join(found)


def test_the_backend_name_check_catches_a_planted_comparison(tmp_path: Path) -> None:
    root = tmp_path / "toolrun"
    _write(root, {"catalog/lint_rules.py": 'def rule(tool):\n    return tool.backend.kind == "http"\n'})
    assert backend_names_in(root, "toolrun", "catalog") == [("toolrun.catalog.lint_rules", "http",
                                                             "toolrun/catalog/lint_rules.py:2")]


def test_a_planted_module_text_importing_cli_from_the_base_fails_every_check_that_should_see_it(tmp_path: Path) -> None:
    # The tests above run the same functions over the real package: a module that does this there fails them.
    root = tmp_path / "toolrun"
    _write(root, {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/text.py": '"""Text helpers."""\n\n\ndef shown(value):\n    from toolrun.cli.display import show\n\n'
                        "    return show(value)\n",
        "cli/__init__.py": "",
        "cli/display.py": "from toolrun.core.text import shown\n",
    })
    imports = imports_in(root, "toolrun")
    where = "toolrun/core/text.py:5: toolrun.core.text imports toolrun.cli.display"
    assert upward_imports(imports) == [f"{where} — base imports cli, which stands above it"]
    never = {rule.name: violations(imports, rule) for rule in NEVER_RULES}
    assert never["anything-to-cli"] == [f"{where} — {NEVER_RULES[5].why}"]
    assert never["base-to-above"] == [f"{where} — {NEVER_RULES[4].why}"]
    assert sum(map(len, never.values())) == 2  # cli importing the base is the right way round
