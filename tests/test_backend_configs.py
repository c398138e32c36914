"""Each built-in backend parses its config once into a frozen dataclass; ``run`` reads that, not the mapping."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.backend_helpers import make_tool
from toolrun.backends.base import ConfigProblem
from toolrun.backends.mcp_server import McpServerBackend, server_spec
from toolrun.backends.mcp_server_config import McpServerConfig


def test_an_mcp_server_config_is_typed_and_frozen_and_names_the_same_server(tmp_path: Path) -> None:
    raw = {"command": ["python", "-m", "srv"], "env": {"B": 2, "A": "x"}, "cwd": "sub", "timeout": 5, "tool": "search"}
    config = McpServerBackend().parse(raw)
    assert config == McpServerConfig(command=("python", "-m", "srv"), env=(("A", "x"), ("B", "2")), cwd="sub",
                                     timeout=5.0, tool="search")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.tool = "other"  # type: ignore[misc]
    assert server_spec(config, tmp_path) == server_spec(raw, tmp_path)  # one connection for both
    assert server_spec(config, tmp_path).cwd == str((tmp_path / "sub").resolve())


def test_an_mcp_server_config_without_a_server_or_a_tool_is_two_problems_at_the_tools_line(tmp_path: Path) -> None:
    assert [p.key for p in McpServerBackend().parse({"command": "x", "url": "http://h/mcp"})] == ["command", "tool"]
    tool = make_tool("mcp_server", {"tool": 3}, folder=tmp_path)
    problems = McpServerBackend().check(tool)
    assert [(p.line, p.message) for p in problems] == [
        (1, "mcp_server needs exactly one of command and url"), (1, "mcp_server needs the name of the server's tool")]
    assert all(isinstance(p, ConfigProblem) for p in McpServerBackend().parse({}))
