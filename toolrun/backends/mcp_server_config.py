"""The mcp_server backend's config, parsed once from its mapping into a frozen ``McpServerConfig``.

The mapping is a toolset's ``mcp_server:`` settings (``command | url, env, headers, cwd,
timeout``) and, for one of its tools, ``tool``: the tool's name on the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolrun.backends.base import ConfigProblem

DEFAULT_CONNECT_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class McpServerConfig:
    """Which server to reach and how, and which of its tools to call."""

    command: tuple[str, ...] = ()
    url: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    headers: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None  # as written: relative to the folder of the toolset file
    timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS
    tool: str = ""  # the tool's name on the server ("" for the server's settings alone)


def parse_mcp_server_config(config: Mapping[str, Any]) -> McpServerConfig | list[ConfigProblem]:
    """The typed config of one tool, or what is wrong with ``config``."""
    problems: list[ConfigProblem] = []
    if bool(config.get("command")) == bool(config.get("url")):
        problems.append(ConfigProblem("command", "mcp_server needs exactly one of command and url",
                                      "write command: [python, -m, our_server] or url: https://host/mcp"))
    if not isinstance(config.get("tool"), str):
        problems.append(ConfigProblem("tool", "mcp_server needs the name of the server's tool",
                                      "write the server in a toolset file (mcp_server: at the top), which names each tool"))
    return problems or mcp_server_config(config)


def mcp_server_config(config: Mapping[str, Any]) -> McpServerConfig:
    """``config`` as an ``McpServerConfig``, unchecked: also a toolset's settings, before it names a tool."""
    command = config.get("command")
    if isinstance(command, str):
        command = [command]
    cwd = config.get("cwd")
    timeout = config.get("timeout", DEFAULT_CONNECT_TIMEOUT_SECONDS)
    url = config.get("url")
    return McpServerConfig(
        command=tuple(str(part) for part in command or ()),
        url=str(url) if url else None,
        env=tuple(sorted((str(k), str(v)) for k, v in (config.get("env") or {}).items())),
        headers=tuple(sorted((str(k), str(v)) for k, v in (config.get("headers") or {}).items())),
        cwd=cwd if isinstance(cwd, str) else None,
        timeout=float(timeout) if isinstance(timeout, (int, float)) else DEFAULT_CONNECT_TIMEOUT_SECONDS,
        tool=str(config.get("tool") or ""),
    )
