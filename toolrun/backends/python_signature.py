"""A python tool's function read from its source, without running it, and held to the tool's schema.

The runner calls the function with the validated arguments as keyword arguments, so a
parameter the function cannot take, one it needs that the model may leave out, or an extra
argument the schema lets through is a ``TypeError`` on some call. Reading the ``def`` line
finds these at load time. A function whose signature the source does not show plainly
(decorated, defined twice, bound by an import or an assignment) is not checked.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class FunctionSignature:
    """What a function accepts as keyword arguments."""

    name: str
    line: int
    by_name: tuple[str, ...]  # parameters a keyword argument can fill
    needed: tuple[str, ...]  # parameters without a default, in order (positional-only ones too)
    positional_only: tuple[str, ...]
    any_keyword: bool  # it has **kwargs


@dataclass(frozen=True)
class ModuleOutline:
    """The names a module binds at top level, and the plain ``def``s among them."""

    names: frozenset[str]
    functions: Mapping[str, FunctionSignature]  # only names defined exactly once, undecorated


@dataclass(frozen=True)
class SignatureMismatch:
    """One way the function and the schema disagree: where in the schema, what, the fix, and how sure.

    ``every_call`` is True when every call (or every call that gives the parameter) fails:
    a load error. Otherwise only some calls fail (the model leaves an argument out, or adds
    one the schema allows): a lint warning.
    """

    schema_path: str  # dotted, for the line: "parameters.properties.city"
    message: str
    fix: str
    every_call: bool


def module_outline(path: Path) -> ModuleOutline:
    """The outline of the Python file at ``path`` (cached while the file is unchanged).

    Raises ``SyntaxError``, ``UnicodeDecodeError`` or ``OSError`` like reading and parsing it would.
    """
    stat = path.stat()
    # ctime and inode too: a same-size rewrite whose mtime was kept (cp -p) still changes them.
    return _cached_outline(str(path), (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino))


@lru_cache(maxsize=256)
def _cached_outline(path: str, _status: tuple[int, ...]) -> ModuleOutline:
    # A catalog of many tools often names many functions of one file: parse it once.
    return outline_of(Path(path).read_text(encoding="utf-8"))


def outline_of(source: str) -> ModuleOutline:
    """Names bound at top level (def, class, assignment, import), and the signatures of plain defs.

    Statements inside top-level ``if``/``try``/``with`` blocks count too (conditional definitions).
    """
    names: set[str] = set()
    bindings: dict[str, int] = {}  # how many times a name is bound: a second binding may change it
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    pending = list(ast.parse(source).body)
    while pending:
        node = pending.pop()
        bound: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = [node.name]
            if not isinstance(node, ast.ClassDef) and not node.decorator_list:
                defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            bound = [t.id for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound = [(alias.asname or alias.name).split(".")[0] for alias in node.names]
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            pending.extend(node.body)
            pending.extend(getattr(node, "orelse", []))
            pending.extend(getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)
        for name in bound:
            names.add(name)
            bindings[name] = bindings.get(name, 0) + 1
    functions = {name: _signature(node) for name, node in defs.items() if bindings.get(name) == 1}
    return ModuleOutline(frozenset(names), functions)


def _signature(node: ast.FunctionDef | ast.AsyncFunctionDef) -> FunctionSignature:
    arguments = node.args
    positional = [*arguments.posonlyargs, *arguments.args]
    first_default = len(positional) - len(arguments.defaults)
    needed = [a.arg for index, a in enumerate(positional) if index < first_default]
    needed += [a.arg for a, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True) if default is None]
    return FunctionSignature(
        name=node.name,
        line=node.lineno,
        by_name=tuple(a.arg for a in [*arguments.args, *arguments.kwonlyargs]),
        needed=tuple(needed),
        positional_only=tuple(a.arg for a in arguments.posonlyargs),
        any_keyword=arguments.kwarg is not None,
    )


def signature_mismatches(signature: FunctionSignature, parameters: Mapping[str, Any]) -> list[SignatureMismatch]:
    """Where calling ``signature`` with arguments valid for ``parameters`` would raise ``TypeError``."""
    properties = parameters.get("properties")
    declared = list(properties) if isinstance(properties, dict) else []
    required = parameters.get("required")
    always_given = {name for name in required if isinstance(name, str)} if isinstance(required, list) else set()
    function = f"{signature.name}()"
    found: list[SignatureMismatch] = []
    if not signature.any_keyword:
        for name in declared:
            if name not in signature.by_name:
                kind = "required" if name in always_given else "optional"
                why = "it is positional-only" if name in signature.positional_only else "it has no such parameter"
                found.append(SignatureMismatch(
                    f"parameters.properties.{name}",
                    f"{function} cannot take the {kind} parameter '{name}' ({why})",
                    f"add '{name}' to the function's parameters (or **kwargs), or remove it from parameters.properties",
                    every_call=True,
                ))
    for name in signature.needed:
        if name in signature.positional_only:
            found.append(SignatureMismatch(
                "parameters", f"{function} needs the positional-only parameter '{name}', which no call can give",
                f"remove the / from the def line, or give '{name}' a default", every_call=True,
            ))
        elif name not in declared:
            found.append(SignatureMismatch(
                "parameters", f"{function} needs '{name}', which parameters.properties does not declare",
                f"declare '{name}' under parameters.properties and list it in required, or give it a default",
                every_call=True,
            ))
        elif name not in always_given:
            found.append(SignatureMismatch(
                f"parameters.properties.{name}",
                f"{function} needs '{name}', but the schema lets the model leave it out (it is not in required)",
                f"add '{name}' to parameters.required, or give it a default in the function ({name}=None)",
                every_call=False,
            ))
    if not signature.any_keyword and parameters.get("additionalProperties", True) is not False:
        found.append(SignatureMismatch(
            "parameters",
            f"{function} takes no other arguments, but the schema lets the model send more "
            "(additionalProperties is not false)",
            "add additionalProperties: false under parameters, or **kwargs to the function",
            every_call=False,
        ))
    return found
