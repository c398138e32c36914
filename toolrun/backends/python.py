"""The python backend: a tool is a function, named ``"pkg.mod:func"`` or ``"file.py:func"``.

``pkg.mod`` is imported with importlib, with the tool's folder first on ``sys.path`` while it
is imported, so a package beside the YAML file is found; ``file.py`` is loaded from the tool's
folder under a module name unique to that file, the folder on ``sys.path`` likewise so it can
import its siblings. Sync functions run in a worker thread, async ones are awaited. A ``str``
result is sent as is; anything else as JSON.

At load time none of the tool's own code runs: the function and its signature are read from
the source (python_signature). A failing call's traceback goes to the ``toolrun.tools``
logger at DEBUG level (``toolrun --debug`` prints it on stderr), never to the model.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.machinery
import importlib.util
import inspect
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from toolrun.backends.base import Backend, BackendOutput, CallContext, ConfigProblem
from toolrun.backends.python_target import PythonConfig, file_path, parse_python_config
from toolrun.core.cache_folder import importing_users_code, path_stats_by_status
from toolrun.core.daemon_threads import in_daemon_thread, write_held_output
from toolrun.core.digests import hex_key
from toolrun.core.errors import TOOL_LOGGER, Problem, ToolError
from toolrun.core.text import did_you_mean, exception_text
from toolrun.core.tool import Tool

if TYPE_CHECKING:  # the load-time checks import it: a call never reads the function's source
    from toolrun.backends.python_signature import FunctionSignature, SignatureMismatch
    from toolrun.backends.warning import BackendWarning

_import_lock = threading.RLock()  # sys.path is process-wide: one import with a tool's folder on it at a time
_functions: dict[tuple[str, str], Callable[..., Any]] = {}
_imported_files: dict[str, ModuleType] = {}  # tool files whose import finished (sys.modules has them from its start)
# The per-call fast path: no Path.resolve() (a dozen system calls) on every call.
_by_tool_target: dict[tuple[Path, str], tuple[Callable[..., Any], bool]] = {}
_by_tool: dict[int, tuple[Tool, tuple[Callable[..., Any], bool]]] = {}
log = logging.getLogger(TOOL_LOGGER)


_FILE_MODULE_PREFIX = "toolrun_tool_"


def _module_name_for(path: Path) -> str:
    digest = hex_key(str(path), 12)
    return f"{_FILE_MODULE_PREFIX}{path.stem}_{digest}"


def forget_imported_code(changed: Iterable[Path]) -> None:
    """Import the python tools' code again at their next call, after the ``changed`` source files were edited
    (a long-running server: ``toolrun mcp``). Every ``file.py`` tool module is dropped — one may import a changed
    sibling — and so is every module loaded from a changed file; calls already running keep their function."""
    changed_files = {os.path.realpath(path) for path in changed}
    for source in changed_files:
        _forget_bytecode(source)
    with _import_lock:
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if name.startswith(_FILE_MODULE_PREFIX) or (isinstance(file, str) and os.path.realpath(file) in changed_files):
                sys.modules.pop(name, None)
        _functions.clear()
        _imported_files.clear()
        _by_tool_target.clear()
        _by_tool.clear()


def _forget_bytecode(source: str) -> None:
    """Remove the ``.pyc`` Python would use for ``source``: Python checks it against the mtime in whole
    seconds and the size, so a same-size edit within a second (or with the mtime kept) of a module a tool
    imports (a sibling of its ``file.py``, a ``pkg.mod``) would otherwise run the old code when imported again."""
    if source.endswith(".py"):
        with contextlib.suppress(OSError, NotImplementedError):  # none kept, or a Python that keeps none
            os.remove(importlib.util.cache_from_source(source))


@contextlib.contextmanager
def _on_import_path(folder: Path) -> Iterator[None]:
    """``folder`` first on ``sys.path`` for one import (or one module look-up), then removed; the
    import writes bytecode only if the user lets Python do so (``importing_users_code``)."""
    entry = str(folder)
    with _import_lock, importing_users_code():
        sys.path.insert(0, entry)
        try:
            yield
        finally:
            sys.path.remove(entry)


class _ToolFileLoader(importlib.machinery.SourceFileLoader):
    """Loads a tool's ``file.py``: its bytecode is used only while the file's whole status is unchanged
    (Python's own check, the mtime in whole seconds and the size, misses a same-size edit within a second)."""

    path_stats = path_stats_by_status


def _import_file(path: Path) -> ModuleType:
    name = _module_name_for(path)
    imported = _imported_files.get(name)
    if imported is not None and sys.modules.get(name) is imported:
        return imported
    with _on_import_path(path.parent):
        # Under the lock: sys.modules holds a module from the start of its import, so only here is one
        # that is there also whole (another thread's first call finished it, or this thread is inside it).
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path, loader=_ToolFileLoader(name, str(path)))
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        _imported_files[name] = module
    return module


def _import_module(module_ref: str, folder: Path) -> ModuleType:
    """``pkg.mod``, installed or beside the tool's YAML file (the folder is searched first, as for a script)."""
    if module_ref in sys.modules:
        return sys.modules[module_ref]
    with _on_import_path(folder):
        return importlib.import_module(module_ref)


def _find_module(module_ref: str, folder: Path) -> importlib.machinery.ModuleSpec | None:
    """The spec of ``pkg.mod`` as ``_import_module`` would find it (finding it imports ``pkg``)."""
    with _on_import_path(folder):
        return importlib.util.find_spec(module_ref)


def _resolved(tool: Tool, backend: PythonBackend) -> tuple[Callable[..., Any], bool]:
    """The tool's function and whether it is a coroutine function, worked out once per tool."""
    entry = _by_tool.get(id(tool))
    if entry is not None and entry[0] is tool:  # the entry keeps the tool alive: its id stays its own
        return entry[1]
    config: PythonConfig = backend.config_of(tool)
    key = (tool.base_dir, config.target)
    found = _by_tool_target.get(key)
    if found is None:
        write_held_output()  # the call's line before anything the module prints as it is imported
        function = _resolve_function(tool, config)
        found = _by_tool_target[key] = (function, inspect.iscoroutinefunction(function))
    if len(_by_tool) < 4096:
        _by_tool[id(tool)] = (tool, found)
    return found


def _resolve_function(tool: Tool, config: PythonConfig) -> Callable[..., Any]:
    module_ref, function_name = config.module, config.name
    if config.in_file:
        path = file_path(tool, module_ref).resolve()
        key = (str(path), function_name)
    else:
        path = None
        key = (module_ref, function_name)
    if key in _functions:
        return _functions[key]
    module = _import_file(path) if path is not None else _import_module(module_ref, tool.base_dir)
    function = getattr(module, function_name, None)
    if function is None:
        raise AttributeError(f"{module_ref} has no function {function_name!r}")
    if not callable(function):
        raise TypeError(f"{module_ref}:{function_name} is not callable")
    _functions[key] = function
    return function


def result_text(value: Any) -> str:
    """What the model sees for a function's return value."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


class PythonBackend(Backend):
    kind = "python"

    def parse(self, config: Mapping[str, Any]) -> PythonConfig | list[ConfigProblem]:
        """The typed config (``PythonConfig``), or why ``function`` is not a "module:function" target."""
        return parse_python_config(config)

    def check(self, tool: Tool) -> list[Problem]:
        """Bad target form, missing file or module, no such function, or a signature no call can fit.

        Reads the source and runs none of it (only finding ``pkg.mod`` imports the package ``pkg``).
        """
        problems = self.config_problems(tool)
        if problems:
            return problems
        found = _mismatches_in_source(tool, self.config_of(tool))
        if isinstance(found, Problem):
            return [found]
        if found is None:
            return []
        source, signature, mismatches = found
        return [Problem(tool.source.file, tool.source.line_of(mismatch.schema_path),
                        f"{mismatch.message} ({source.name} line {signature.line})", mismatch.fix)
                for mismatch in mismatches if mismatch.every_call]

    def warnings(self, tool: Tool) -> list[BackendWarning]:
        """python-signature: calls the function would refuse when the model leaves out or adds an argument."""
        found = _mismatches_in_source(tool, self.config_of(tool))
        if found is None or isinstance(found, Problem):
            return []
        source, signature, mismatches = found
        from toolrun.backends.warning import BackendWarning  # the lint's: a call never makes one

        return [BackendWarning("python-signature", mismatch.schema_path,
                               f"{mismatch.message} ({source.name} line {signature.line}): {mismatch.fix}")
                for mismatch in mismatches if not mismatch.every_call]

    async def run(self, tool: Tool, arguments: dict[str, Any], context: CallContext) -> BackendOutput:
        try:
            # The first call imports the tool's module here, on the event loop's (main) thread, as Python
            # code expects: a module may set a signal handler, ask for the event loop or open a sqlite
            # connection its async functions use. The calls beside it wait for that import.
            function, is_coroutine = _resolved(tool, self)
            if is_coroutine:
                write_held_output()  # the call's line before anything the function prints
                value = await function(**arguments)
            else:
                # A daemon worker thread: a tool stuck past its timeout must not keep toolrun alive at exit.
                value = await in_daemon_thread(functools.partial(function, **arguments), name="toolrun-python")
                if type(value) is not str and inspect.isawaitable(value):  # a sync wrapper around a coroutine function
                    value = await value
        except ToolError as exc:
            return BackendOutput(str(exc), is_error=True)
        except Exception as exc:  # the model gets the type and message, never a traceback
            log.debug("python tool %s failed", tool.name, exc_info=True)
            return BackendOutput(exception_text(exc), is_error=True)
        return BackendOutput(result_text(value))


def _mismatches_in_source(tool: Tool, config: PythonConfig
                          ) -> tuple[Path, FunctionSignature, list[SignatureMismatch]] | Problem | None:
    """The function's file, signature and disagreements with the tool's schema; the problem; or None when unknown."""
    from toolrun.backends.python_signature import signature_mismatches

    found = _function_in_source(tool, config)
    if found is None or isinstance(found, Problem):
        return found
    source, signature = found
    return source, signature, signature_mismatches(signature, tool.parameters)


def _function_in_source(tool: Tool, config: PythonConfig) -> tuple[Path, FunctionSignature] | Problem | None:
    """The function's file and signature, read without running it; the problem; or None when unknown.

    None too for a function of Python's own library (``json:dumps``): it was not written as a tool.
    """
    from toolrun.backends.python_signature import module_outline

    where = tool.source.file
    line = tool.source.line_of("backend.python")
    module_ref, function_name = config.module, config.name
    if config.in_file:
        source = file_path(tool, module_ref)
        if not source.is_file():
            return Problem(where, line, f"python file not found: {source}", "the path is relative to this YAML file's folder")
    else:
        found = _module_source(tool, module_ref)
        if found is None or isinstance(found, Problem):
            return found  # None: compiled, or a namespace package; no source to read
        source = found
    try:
        outline = module_outline(source)
    except SyntaxError as exc:
        return Problem(where, line, f"{source.name} does not parse: {exc.msg}",
                       f"fix the syntax error at {source.name} line {exc.lineno}")
    except UnicodeDecodeError as exc:
        return Problem(where, line, f"{source.name} is not UTF-8 text ({exc.reason})", "save it as UTF-8")
    except OSError as exc:
        return Problem(where, line, f"cannot read {source}: {exc.strerror}")
    if function_name not in outline.names:
        guess = did_you_mean(function_name, sorted(outline.functions))
        return Problem(where, line, f"{source.name} defines no function {function_name!r}",
                       f"did you mean {guess!r}?" if guess else "check the name after the colon")
    signature = outline.functions.get(function_name)
    if signature is None or _in_standard_library(source):
        return None  # decorated, imported or assigned, or not written as a tool (json:dumps)
    return source, signature


def _module_source(tool: Tool, module_ref: str) -> Path | Problem | None:
    """The .py file of ``pkg.mod`` (installed or beside the YAML file), None when it has none, or the problem."""
    where, line = tool.source.file, tool.source.line_of("backend.python")
    try:
        spec = _find_module(module_ref, tool.base_dir)
    except ImportError as exc:
        spec, reason = None, f" ({exc})"
    except Exception as exc:  # the package's __init__ ran and failed
        log.debug("importing %s for tool %s failed", module_ref, tool.name, exc_info=True)
        package = module_ref.partition(".")[0]
        return Problem(where, line, f"importing {package} failed: {type(exc).__name__}: {exc}",
                       f"fix {package} (its __init__ runs when toolrun looks for {module_ref})")
    else:
        reason = ""
    if spec is None:
        found = _deepest_package(module_ref, tool.base_dir)
        if found is not None:  # the package is there, the module is not: a typo or a missing file
            package_folder, missing = found
            return Problem(where, line, f"python module not found: {module_ref} ({package_folder} has no "
                                        f"{missing}.py or {missing}/)",
                           f"check the module name, or add {missing}.py to {package_folder}")
        first = module_ref.split(".")[0]
        return Problem(where, line,
                       f"python module not found: {module_ref}{reason} (looked in the installed packages "
                       f"and in {tool.base_dir})",
                       f"install the package, put {first}/ (with its __init__.py) or {first}.py beside this "
                       "YAML file, or use a file: tools.py:function")
    origin = spec.origin
    if not origin or not origin.endswith(".py") or not Path(origin).is_file():
        return None
    return Path(origin)


def _deepest_package(module_ref: str, folder: Path) -> tuple[str, str] | None:
    """For a ``module_ref`` not found: the folder of its longest prefix that is a package, and the
    name missing from it (``mypkg.tool`` -> (".../mypkg", "tool")); None when no prefix is found."""
    parts = module_ref.split(".")
    for size in range(len(parts) - 1, 0, -1):
        try:
            spec = _find_module(".".join(parts[:size]), folder)
        except Exception:  # a parent that is not there or cannot be imported: try a shorter one
            continue
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        if locations:
            return locations[0], parts[size]
    return None


def _in_standard_library(path: Path) -> bool:
    """True for a module of Python's own library: its functions were not written as tools."""
    resolved = path.resolve()
    return any(resolved.is_relative_to(folder) for folder in _standard_library_folders())


@functools.cache
def _standard_library_folders() -> tuple[Path, ...]:
    import sysconfig  # only a function found plainly in its source asks, once

    paths = sysconfig.get_paths()
    return tuple({Path(paths[key]).resolve() for key in ("stdlib", "platstdlib") if key in paths})
