"""The python backend: a tool is a function, named ``"pkg.mod:func"`` or ``"file.py:func"``.

``pkg.mod`` is imported with importlib; ``file.py`` is loaded from the tool's folder under a
module name unique to that file, with the folder on ``sys.path`` only while it is imported
so it can import its siblings. Sync functions run in a worker thread, async ones are
awaited. A ``str`` result is sent as is; anything else as JSON.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import importlib.util
import inspect
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from toolrun.backends.base import Backend, BackendOutput, CallContext
from toolrun.daemon_threads import in_daemon_thread
from toolrun.errors import Problem, ToolError
from toolrun.tool import Tool

_import_lock = threading.Lock()  # sys.path is process-wide: one file import at a time
_functions: dict[tuple[str, str], Callable[..., Any]] = {}


def split_target(target: str) -> tuple[str, str]:
    """``"pkg.mod:func"`` -> ``("pkg.mod", "func")``; ValueError when the form is wrong."""
    module, sep, function = target.rpartition(":")
    if not sep or not module.strip() or not function.isidentifier():
        raise ValueError(f"expected \"module:function\" or \"file.py:function\", got {target!r}")
    return module.strip(), function


def _is_file_target(module: str) -> bool:
    return module.endswith(".py")


def _file_path(tool: Tool, module: str) -> Path:
    path = Path(module)
    return path if path.is_absolute() else (tool.base_dir / path)


def _module_name_for(path: Path) -> str:
    digest = hashlib.sha1(str(path).encode("utf-8")).hexdigest()[:12]
    return f"toolrun_tool_{path.stem}_{digest}"


def _import_file(path: Path) -> ModuleType:
    name = _module_name_for(path)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    with _import_lock:
        sys.path.insert(0, folder)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        finally:
            sys.path.remove(folder)
    return module


def resolve_function(tool: Tool) -> Callable[..., Any]:
    """The function a python tool names, imported once and cached."""
    module_ref, function_name = split_target(str(tool.backend.config["function"]))
    if _is_file_target(module_ref):
        path = _file_path(tool, module_ref).resolve()
        key = (str(path), function_name)
    else:
        path = None
        key = (module_ref, function_name)
    if key in _functions:
        return _functions[key]
    module = _import_file(path) if path is not None else importlib.import_module(module_ref)
    function = getattr(module, function_name, None)
    if function is None:
        raise AttributeError(f"{module_ref} has no function {function_name!r}")
    if not callable(function):
        raise TypeError(f"{module_ref}:{function_name} is not callable")
    _functions[key] = function
    return function


def _top_level_names(source: str) -> set[str]:
    """Names a module binds at top level (def, class, assignment, import), without running it.

    Statements inside top-level ``if``/``try``/``with`` blocks count too (conditional definitions).
    """
    names: set[str] = set()
    pending = list(ast.parse(source).body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            pending.extend(node.body)
            pending.extend(getattr(node, "orelse", []))
            pending.extend(getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                pending.extend(handler.body)
    return names


def result_text(value: Any) -> str:
    """What the model sees for a function's return value."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


class PythonBackend(Backend):
    kind = "python"

    def check(self, tool: Tool) -> list[Problem]:
        """Bad target form, missing file or module, or a file that defines no such function."""
        where = tool.source.file
        line = tool.source.line_of("backend.python")
        target = tool.backend.config.get("function")
        if not isinstance(target, str):
            return [Problem(where, line, "backend.python must be a string \"module:function\" or \"file.py:function\"")]
        try:
            module_ref, function_name = split_target(target)
        except ValueError as exc:
            return [Problem(where, line, str(exc), "write it as tools.py:get_stock or mypackage.tools:get_stock")]
        if _is_file_target(module_ref):
            path = _file_path(tool, module_ref)
            if not path.is_file():
                return [Problem(where, line, f"python file not found: {path}",
                                "the path is relative to this YAML file's folder")]
            try:
                names = _top_level_names(path.read_text(encoding="utf-8"))
            except SyntaxError as exc:
                return [Problem(where, line, f"{path.name} does not parse: {exc.msg}",
                                f"fix the syntax error at {path.name} line {exc.lineno}")]
            except UnicodeDecodeError as exc:
                return [Problem(where, line, f"{path.name} is not UTF-8 text ({exc.reason})", "save it as UTF-8")]
            if function_name not in names:
                return [Problem(where, line, f"{path.name} defines no function {function_name!r}",
                                "check the name after the colon")]
            return []
        try:
            found = importlib.util.find_spec(module_ref)
        except (ImportError, ValueError) as exc:
            found, reason = None, f" ({exc})"
        else:
            reason = ""
        if found is None:
            return [Problem(where, line, f"python module not found: {module_ref}{reason}",
                            "install the package, or use a file: file.py:function")]
        return []

    async def run(self, tool: Tool, arguments: dict[str, Any], context: CallContext) -> BackendOutput:
        function = resolve_function(tool)
        try:
            if inspect.iscoroutinefunction(function):
                value = await function(**arguments)
            else:
                # A daemon thread per call: a tool stuck past its timeout must not keep toolrun alive at exit.
                value = await in_daemon_thread(functools.partial(function, **arguments), name="toolrun-python")
                if inspect.isawaitable(value):  # a sync wrapper around a coroutine function
                    value = await value
        except ToolError as exc:
            return BackendOutput(str(exc), is_error=True)
        except Exception as exc:  # the model gets the type and message, never a traceback
            return BackendOutput(f"{type(exc).__name__}: {exc}", is_error=True)
        return BackendOutput(result_text(value))
