"""Backends run tools. Built-ins are registered through the same entry points a plugin uses."""

from __future__ import annotations

from functools import cache, lru_cache
from importlib.metadata import entry_points

from toolrun.backends.base import Backend, BackendOutput, CallContext

_BUILT_IN = {
    "python": "toolrun.backends.python:PythonBackend",
    "shell": "toolrun.backends.shell:ShellBackend",
    "http": "toolrun.backends.http:HttpBackend",
}


def _load(target: str) -> type[Backend]:
    module_name, _, attribute = target.partition(":")
    module = __import__(module_name, fromlist=[attribute])
    return getattr(module, attribute)


@cache
def backend_targets() -> dict[str, str]:
    """Backend name -> "module:Class", built-ins first, then installed plugins."""
    targets = dict(_BUILT_IN)
    for entry in entry_points(group="toolrun.backends"):
        targets.setdefault(entry.name, entry.value)
    return targets


@cache
def get_backend(kind: str) -> Backend:
    """The backend registered as ``kind``; KeyError when there is none."""
    target = backend_targets()[kind]
    return _load(target)()


__all__ = ["Backend", "BackendOutput", "CallContext", "backend_targets", "get_backend"]
