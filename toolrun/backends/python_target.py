"""What a python tool's ``backend.python`` names: ``pkg.mod:function`` or ``file.py:function``.

The backend's typed config (``PythonConfig``, parsed once), kept apart from the backend so
the catalog cache can tell which file a tool's load-time check reads without importing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolrun.backends.base import ConfigProblem
from toolrun.core.tool import Tool


@dataclass(frozen=True)
class PythonConfig:
    """The function a python tool runs: ``module`` (``pkg.mod`` or ``file.py``) and the function's ``name`` in it."""

    target: str  # as written: "pkg.mod:func"
    module: str
    name: str

    @property
    def in_file(self) -> bool:
        """A ``file.py`` beside the YAML file, not a module found by the import system."""
        return is_file_target(self.module)


def parse_python_config(config: Mapping[str, Any]) -> PythonConfig | list[ConfigProblem]:
    """The typed config of ``{"function": "pkg.mod:func"}``, or why the target is not one."""
    target = config.get("function")
    if not isinstance(target, str):
        return [ConfigProblem("function", "backend.python must be a string \"module:function\" or \"file.py:function\"")]
    try:
        module, name = split_target(target)
    except ValueError as exc:
        return [ConfigProblem("function", str(exc), "write it as tools.py:get_stock or mypackage.tools:get_stock")]
    return PythonConfig(target, module, name)


def split_target(target: str) -> tuple[str, str]:
    """``"pkg.mod:func"`` -> ``("pkg.mod", "func")``; ValueError when the form is wrong."""
    module, sep, function = target.rpartition(":")
    if not sep or not module.strip() or not function.isidentifier():
        raise ValueError(f"expected \"module:function\" or \"file.py:function\", got {target!r}")
    return module.strip(), function


def is_file_target(module: str) -> bool:
    """``tools.py`` (a file beside the YAML file), not ``pkg.mod`` (found by the import system)."""
    return module.endswith(".py")


def file_path(tool: Tool, module: str) -> Path:
    """The file a ``file.py`` target names: relative to the tool's YAML file's folder."""
    path = Path(module)
    return path if path.is_absolute() else (tool.base_dir / path)


def source_file(tool: Tool) -> Path | None:
    """The ``.py`` file a file target names; None for ``pkg.mod`` targets and malformed ones."""
    config = tool.backend.parsed if isinstance(tool.backend.parsed, PythonConfig) else parse_python_config(tool.backend.config)
    if isinstance(config, list) or not config.in_file:
        return None
    return file_path(tool, config.module)
