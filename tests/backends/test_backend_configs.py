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


HTTP_TOOL = """
tools:
  - name: forecast
    description: The weather forecast for a city. Use this when asked about the weather somewhere.
    parameters: {type: object, properties: {city: {type: string, description: a city}}, required: [city]}
    backend:
      http: {url: "https://api.example/forecast/{city}", timeout: 5s}
"""


def _counting_parse(monkeypatch: pytest.MonkeyPatch, backend_class: type) -> list[object]:
    """Record every ``parse`` of ``backend_class`` (the call still parses)."""
    calls: list[object] = []
    original = backend_class.parse

    def counted(self: object, config: object) -> object:
        calls.append(config)
        return original(self, config)

    monkeypatch.setattr(backend_class, "parse", counted)
    return calls


SHELL_TOOL = HTTP_TOOL.replace('http: {url: "https://api.example/forecast/{city}", timeout: 5s}',
                              'shell: {argv: [echo, --, "{{ city }}"], timeout: 5s}')
PYTHON_TOOL = HTTP_TOOL.replace('http: {url: "https://api.example/forecast/{city}", timeout: 5s}',
                               'python: "weather.py:forecast"')


@pytest.mark.parametrize("kind, text", [("http", HTTP_TOOL), ("shell", SHELL_TOOL), ("python", PYTHON_TOOL)])
def test_the_loader_parses_a_config_once_for_its_check_and_every_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      kind: str, text: str) -> None:
    from toolrun.backends import get_backend
    from toolrun.catalog.loader import load_tool_file

    backend = get_backend(kind)
    parses = _counting_parse(monkeypatch, type(backend))
    (tmp_path / "weather.py").write_text("def forecast(city: str) -> str:\n    return city\n")
    (tmp_path / "tools.yaml").write_text(text)
    [(_, _, tool)], problems = load_tool_file(tmp_path / "tools.yaml")
    assert problems == [] and tool is not None
    assert backend.config_of(tool) is backend.config_of(tool) is tool.backend.parsed
    backend.warnings(tool)
    assert len(parses) == 1


def test_a_tool_without_a_parsed_config_parses_it_at_its_first_call_only(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    parses = _counting_parse(monkeypatch, McpServerBackend)
    tool = make_tool("mcp_server", {"command": ["srv"], "tool": "search"}, folder=tmp_path)  # as the cache rebuilds it
    backend = McpServerBackend()
    assert backend.config_of(tool) is backend.config_of(tool)
    assert len(parses) == 1


def test_a_shell_config_is_typed_and_its_key_rules_are_the_backends_own(tmp_path: Path) -> None:
    from toolrun.backends.shell import ShellBackend
    from toolrun.backends.shell_config import ShellConfig

    backend = ShellBackend()
    raw = {"argv": ["grep", "-c", "--", "{{ q }}"], "env": {"LANG": "C"}, "timeout": "2s", "ok_exit_codes": [0, 1]}
    assert backend.parse(raw) == ShellConfig(argv=("grep", "-c", "--", "{{ q }}"), env=(("LANG", "C"),),
                                             timeout=2.0, ok_exit_codes=(0, 1))
    assert backend.parse({"shell": True, "command": "ls"}) == ShellConfig(shell=True, command="ls")
    # The rules between keys were the catalog's, by the backend's name; now any loader of the backend gets them.
    assert [(p.key, p.message) for p in backend.parse({"command": "ls", "argv": ["ls"]})] == [
        ("command", "'command' runs through /bin/sh")]
    assert [p.key for p in backend.parse({"shell": True, "argv": ["ls"]})] == ["shell", "argv"]
    assert [p.message for p in backend.parse({"cwd": "/tmp"})] == ["the shell backend needs 'argv'"]


def test_a_hand_built_shell_tool_that_does_not_parse_is_an_error_result_not_a_crash(tmp_path: Path) -> None:
    from tests.backend_helpers import call

    outcome = call(make_tool("shell", {"argv": []}, folder=tmp_path), {})
    assert outcome.is_error and "argv must be a non-empty list" in outcome.result


def test_the_http_backend_owns_the_one_body_rule() -> None:
    from toolrun.backends.http import HttpBackend

    [problem] = HttpBackend().parse({"url": "https://h/a", "json": {"a": 1}, "form": {"b": "2"}})
    assert (problem.key, problem.message) == ("form", "'json' and 'form' are both set")


def test_a_python_config_is_the_target_split_once(tmp_path: Path) -> None:
    from toolrun.backends.python import PythonBackend
    from toolrun.backends.python_target import PythonConfig, source_file

    backend = PythonBackend()
    assert backend.parse({"function": "tools.py:get_stock"}) == PythonConfig("tools.py:get_stock", "tools.py", "get_stock")
    assert backend.parse({"function": "pkg.mod:run"}).in_file is False
    [problem] = backend.parse({"function": "tools.py"})
    assert problem.key == "function" and "expected \"module:function\"" in problem.message
    tool = make_tool("python", {"function": "no colon"}, folder=tmp_path)
    [found] = backend.check(tool)
    assert found.line == 1 and found.fix == "write it as tools.py:get_stock or mypackage.tools:get_stock"
    assert source_file(make_tool("python", {"function": "lib/tools.py:f"}, folder=tmp_path)) == tmp_path / "lib/tools.py"
