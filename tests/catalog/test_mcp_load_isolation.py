"""One broken tool file never stops a command that needs none of its tools, and an MCP server's
tool list is served from the cache of its last answer, so commands that do not call it never start it.

Broken servers here are commands that do not exist (they fail at once); the lazy-server tests start
the probe server of tests/mcp_probe_server.py (it writes server.pid when it starts).
"""

from __future__ import annotations

import json
import stat
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

import toolrun
from tests.mcp_probe_server import copy_probe_server
from toolrun.catalog.gate import load_checked_catalog
from toolrun.catalog.server_listing import listing_key, read_listing, write_listing
from toolrun.cli import main

LOCAL_TOOL = """
name: what_day
description: Returns the name of today's weekday, like Tuesday. Use it when the user asks which day it is;
  do not use it for dates or times.
parameters: {type: object, properties: {}, additionalProperties: false}
backend: {python: "local.py:today"}
"""
BROKEN_SERVER = "mcp_server:\n  command: [no-such-mcp-server-command]\n"
def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A tools.d with one python tool and one MCP server that cannot start; a cache of its own."""
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(tmp_path / "cache"))
    folder = tmp_path / "tools.d"
    folder.mkdir()
    write(folder, "local.py", "def today() -> str:\n    return 'Tuesday'\n")
    write(folder, "local.yaml", LOCAL_TOOL)
    write(folder, "broken.yaml", BROKEN_SERVER)
    return folder


def recipe(tmp_path: Path, tools_line: str) -> Path:
    return write(tmp_path, "recipe.yaml", f"name: day\nmodel: openai:gpt-4o-mini\n{tools_line}\n"
                                          "messages: [{user: Which day is it?}]\n")


def test_a_command_that_needs_only_healthy_files_runs_and_one_that_needs_all_stops(tools: Path, tmp_path: Path) -> None:
    catalog = load_checked_catalog(tools, wanted=lambda name: name == "what_day", lint_together=None)
    assert list(catalog.tools) == ["what_day"]
    [problem] = catalog.problems
    assert Path(str(problem.file)).name == "broken.yaml" and "did not start" in problem.message

    model = toolrun.ScriptedModel([toolrun.ScriptedModel.calls([("what_day", {})]), "Tuesday."])
    assert toolrun.run(recipe(tmp_path, "tools: [what_day]"), model=model).final == "Tuesday."
    with pytest.raises(toolrun.LoadError, match="did not start"):  # without tools: it needs the whole catalog
        toolrun.run(recipe(tmp_path, ""), model=toolrun.ScriptedModel(["no"]))
    with pytest.raises(toolrun.LoadError, match="did not start"):  # the library stops by default
        toolrun.load_catalog(tools)
    partial = toolrun.load_catalog(tools, partial=True)
    assert list(partial.tools) == ["what_day"] and len(partial.problems) == 1


def test_a_tool_missing_from_a_partial_catalog_names_the_broken_file_too(tools: Path, tmp_path: Path) -> None:
    # The server that did not start may be where search_tickets is: both are said, not only "unknown tool".
    with pytest.raises(toolrun.LoadError) as caught:
        toolrun.run(recipe(tmp_path, "tools: [what_day, search_tickets]"), model=toolrun.ScriptedModel(["no"]))
    messages = [problem.message for problem in caught.value.problems]
    assert any("did not start" in message for message in messages)
    assert any("search_tickets" in message for message in messages)


def test_a_file_with_a_problem_that_declares_a_needed_tool_still_stops(tools: Path) -> None:
    write(tools, "other.yaml", LOCAL_TOOL.replace("what_day", "what_month").replace("backend:", "backend_typo:"))
    with pytest.raises(toolrun.LoadError, match="other.yaml"):
        load_checked_catalog(tools, names=["what_month"], lint_together=None)
    write(tools, "dup.yaml", LOCAL_TOOL)  # what_day twice: which one is meant is not for us to guess
    with pytest.raises(toolrun.LoadError, match="duplicate tool name 'what_day'"):
        load_checked_catalog(tools, wanted=lambda name: name == "what_day", lint_together=None)


def test_call_recipe_list_and_lint_on_the_command_line(tools: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    called = runner.invoke(main, ["call", "what_day", "--tools-dir", str(tools)])
    assert called.exit_code == 0 and called.stdout.strip() == "Tuesday"
    assert "broken.yaml" not in called.stderr  # a name found in a tool file is taken from there: no server is tried

    listed = runner.invoke(main, ["tools", "list", "--tools-dir", str(tools)])  # needs every tool: tries the server
    assert listed.exit_code == 2 and listed.stdout.splitlines()[1].startswith("what_day ")
    assert f"error: {tools / 'broken.yaml'}:1: the MCP server no-such-mcp-server-command did not start" in listed.stderr

    linted = runner.invoke(main, ["tools", "lint", "--tools-dir", str(tools), "--json"])
    document = json.loads(linted.stdout)
    assert linted.exit_code == 2 and document["tools"] == 1 and len(document["problems"]) == 1

    # The failed start is remembered: a recipe that needs none of its tools says so, without trying again.
    script = write(tmp_path, "turns.yaml", "- tool_calls: [{name: what_day, arguments: {}}]\n- text: Tuesday.\n")
    shown = runner.invoke(main, ["recipe", str(recipe(tmp_path, "tools: [what_day]")), "--no-log",
                                 "--model", f"scripted:{script}", "--tools-dir", str(tools)])
    assert shown.exit_code == 0, shown.stderr
    assert f"warning: {tools / 'broken.yaml'}:1: the MCP server no-such-mcp-server-command did not start" in shown.stderr
    assert "not tried again for 60s" in shown.stderr
    assert "the tools of 1 file with a problem are left out; this command needs none of them" in shown.stderr


def test_a_failed_start_is_remembered_for_a_while_and_refresh_tries_again(tools: Path) -> None:
    marker = tools / "starts.txt"
    write(tools, "broken.yaml", "mcp_server:\n  command: [python, -c, \"open('starts.txt', 'a').write('x')\"]\n"
                                "  timeout: 10s\n")
    first = toolrun.load_catalog(tools, partial=True).problems[0].message
    second = toolrun.load_catalog(tools, partial=True).problems[0].message
    assert marker.read_text() == "x"  # the second load did not start it again
    assert "not tried again for 60s" in second and "not tried again" not in first
    refreshed = load_checked_catalog(tools, partial=True, refresh_servers=True)
    assert marker.read_text() == "xx" and "not tried again" not in refreshed.problems[0].message


def test_a_servers_tools_come_from_the_cache_and_calls_from_the_live_server(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(tmp_path / "cache"))
    tools = tmp_path / "tools.d"
    tools.mkdir()
    copy_probe_server(tools)
    toolset = write(tools, "probe.yaml", "mcp_server:\n  command: [python, probe_server.py]\n  timeout: 20s\n")
    pid_file = tools / "server.pid"
    assert "whoami" in toolrun.load_catalog(tools) and pid_file.exists()  # the first load asks the server
    pid_file.unlink()
    catalog = toolrun.load_catalog(tools)
    whoami = catalog.get("whoami")
    assert whoami is not None and whoami.description.startswith("Returns the process id of this probe server")
    assert not pid_file.exists()  # the second load did not start it
    assert toolrun.call(catalog, "whoami", {}).result.isdigit()  # the call reaches the live server

    cached = list(tools.parent.joinpath("cache").glob("mcp-tools-*.json"))
    assert len(cached) == 1 and stat.S_IMODE(cached[0].stat().st_mode) == 0o600

    # A live answer that differs from the cache replaces it, and says so.
    key = listing_key(toolset, {"command": ["python", "probe_server.py"], "timeout": "20s"})
    stale = read_listing(toolset, key)
    assert stale is not None and stale.tools is not None
    stale.tools.append(type(stale.tools[0])("gone_tool", "Was here once.", {"type": "object"}))
    write_listing(toolset, key, stale)
    assert "gone_tool" in toolrun.load_catalog(tools, lint=False)  # served from the (stale) cache
    fresh = load_checked_catalog(tools, refresh_servers=True)
    assert "gone_tool" not in fresh and fresh.notices == [
        f"{toolset}: the MCP server's tools changed since they were cached (removed gone_tool); "
        "the cache now holds the new list"]
    assert "gone_tool" not in toolrun.load_catalog(tools)


def test_the_listing_key_follows_the_file_the_env_names_and_the_servers_own_file(tmp_path: Path) -> None:
    server = write(tmp_path, "server.py", "print('v1')\n")
    toolset = write(tmp_path, "s.yaml", "mcp_server: {command: [python, server.py]}\n")
    config = {"command": ["python", "server.py"], "env": {"TOKEN": "${env:TOKEN}"}}
    key = listing_key(toolset, config)
    assert listing_key(toolset, {**config, "env": {"TOKEN": "another value"}}) == key  # names, never values
    assert listing_key(toolset, {**config, "env": {"OTHER": "x"}}) != key
    server.write_text("print('version two')\n", encoding="utf-8")
    assert listing_key(toolset, config) != key
    toolset.write_text("mcp_server: {command: [python, server.py], timeout: 5s}\n", encoding="utf-8")
    assert len({key, listing_key(toolset, config)}) == 2
