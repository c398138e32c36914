"""Backends run tools. Built-ins are registered through the same entry points a plugin uses."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from typing import TYPE_CHECKING

from toolrun.backends.base import Backend, BackendOutput, CallContext
from toolrun.core.registry import PluginRegistry

if TYPE_CHECKING:
    from toolrun.backends.warning import BackendWarning
    from toolrun.core.tool import Tool

BACKENDS: PluginRegistry[type[Backend]] = PluginRegistry(
    "backend",
    "toolrun.backends",
    {
        "python": "toolrun.backends.python:PythonBackend",
        "shell": "toolrun.backends.shell:ShellBackend",
        "http": "toolrun.backends.http:HttpBackend",
        "mcp_server": "toolrun.backends.mcp_server:McpServerBackend",
    },
)


def backend_targets() -> dict[str, str]:
    """Backend name -> "module:Class", built-ins first, then installed plugins."""
    return BACKENDS.targets()


@cache
def get_backend(kind: str) -> Backend:
    """The backend registered as ``kind`` (one instance, shared); ``UnknownPlugin`` (a KeyError) when there is none."""
    return BACKENDS.load(kind)()


def prepare_to_serve(tools: Iterable[Tool]) -> None:
    """Each backend of ``tools`` does now what its first call would do once (``Backend.prepare_to_serve``)."""
    for kind in sorted({tool.backend.kind for tool in tools}):
        get_backend(kind).prepare_to_serve()


def __getattr__(name: str) -> object:
    if name == "BackendWarning":  # for a backend's warnings(): imported when the lint first asks for them
        from toolrun.backends.warning import BackendWarning

        return BackendWarning
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BACKENDS", "Backend", "BackendOutput", "BackendWarning", "CallContext", "backend_targets", "get_backend",
           "prepare_to_serve"]
