"""What a python tool's ``backend.python`` names: ``pkg.mod:function`` or ``file.py:function``.

Kept apart from the backend so the catalog cache can tell which file a tool's load-time
check reads without importing the backend.
"""

from __future__ import annotations

from pathlib import Path

from toolrun.core.tool import Tool


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
    target = tool.backend.config.get("function")
    if not isinstance(target, str):
        return None
    try:
        module, _ = split_target(target)
    except ValueError:
        return None
    return file_path(tool, module) if is_file_target(module) else None
