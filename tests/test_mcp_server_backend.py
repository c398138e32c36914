"""The mcp_server toolset: tools of an existing MCP server (written with the SDK) in the catalog and in runs.

The servers are real processes started by the backend over stdio (or ``toolrun mcp --http``
reached by URL); each test's server has its own folder, so its own connection.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import toolrun
from tests.mcp_helpers import ROOT, TEAM_TOKENS
from toolrun.catalog.lint import lint_catalog
from toolrun.catalog.loader import load_catalog
from toolrun.providers.scripted import ScriptedModel

EXAMPLE = ROOT / "examples" / "mcp-tickets"

PROBE_SERVER = '''
import os, time
from mcp.server.mcpserver import MCPServer

with open("server.pid", "w") as f:
    f.write(str(os.getpid()))
server = MCPServer("probe")

@server.tool(description="Returns the process id of this probe server as text. Use it to see which server process "
                         "answers; do not use it for anything else. It changes nothing.")
def whoami() -> str:
    return str(os.getpid())

@server.tool(description="Sleeps for the given number of seconds, then answers slept. Use it to keep a call "
                         "running for a while; do not use it for real work. It changes nothing.")
def slow(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"

server.run()
'''


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of examples/mcp-tickets for this module. Its server starts once: the backend keeps one
    connection per server (same command, folder and settings), which every test here shares."""
    folder = tmp_path_factory.mktemp("example") / "mcp-tickets"
    shutil.copytree(EXAMPLE, folder)
    return folder


@pytest.fixture(scope="module")
def tickets_dir(example: Path) -> Path:
    return example / "tools.d"


def same_server(tickets_dir: Path, **more: Any) -> str:
    """An mcp_server mapping (flow style) that reaches the example's server process, so its connection."""
    settings = {"command": ["python", "ticket_server.py"], "cwd": str(tickets_dir), "timeout": "20s", **more}
    return "mcp_server: " + json.dumps(settings)


def test_the_example_servers_tools_load_and_lint_like_our_own(tickets_dir: Path) -> None:
    catalog = toolrun.load_catalog(tickets_dir)
    assert list(catalog.tools) == ["search_tickets", "get_ticket", "close_ticket"]
    search = catalog.tools["search_tickets"]
    assert search.backend.kind == "mcp_server" and search.backend.config["tool"] == "search_tickets"
    assert search.parameters["properties"]["status"]["enum"] == ["open", "closed", "any"]
    assert search.parameters["required"] == ["query"]
    assert search.annotations is not None and search.annotations.read_only is True
    assert search.annotations.title == "Search tickets"
    assert search.timeout == 20.0  # mcp_server.timeout
    close = catalog.tools["close_ticket"]
    assert close.confirm is True and close.annotations is not None and close.annotations.destructive is True
    assert close.source.file == tickets_dir / "tickets.yaml" and close.source.line == 10  # its override's line
    assert [f for f in lint_catalog(catalog) if f.severity == "error"] == []


def test_calls_are_validated_before_they_are_sent_and_run_on_the_server(tickets_dir: Path) -> None:
    catalog = toolrun.load_catalog(tickets_dir)
    found = toolrun.call(catalog, "search_tickets", {"query": "payments"})
    assert not found.is_error
    assert json.loads(found.result) == {"tickets": [{"id": "T-1002", "title": "payments webhook retries pile up",
                                                     "status": "open", "service": "payments"}]}
    invalid = toolrun.call(catalog, "get_ticket", {"ticket_id": "1001"})
    assert invalid.is_error and invalid.result.startswith("invalid arguments for get_ticket: at $.ticket_id: expected a string matching")
    unknown = toolrun.call(catalog, "get_ticket", {"ticket_id": "T-9999"})
    assert unknown.is_error and "no ticket T-9999" in unknown.result  # the server's own error result
    refused = toolrun.call(catalog, "close_ticket", {"ticket_id": "T-1001", "resolution": "latency fixed by rollback"})
    assert refused.is_error and "approval" in refused.result


def test_selection_prefix_and_overrides(tmp_path: Path, tickets_dir: Path) -> None:
    write(tmp_path, "tickets.yaml", f"""
        {same_server(tickets_dir, tools=["*_ticket"], prefix="helpdesk_")}
        tools:
          - name: get_ticket
            description: >-
              Reads one helpdesk ticket by id, e.g. T-1001. Use it when a ticket id is known; do not
              use it to search for tickets, and do not guess ids.
            timeout: 5s
    """)
    catalog = toolrun.load_catalog(tmp_path)
    assert list(catalog.tools) == ["helpdesk_get_ticket", "helpdesk_close_ticket"]
    renamed = catalog.tools["helpdesk_get_ticket"]
    assert renamed.description.startswith("Reads one helpdesk ticket") and renamed.timeout == 5.0
    assert renamed.backend.config["tool"] == "get_ticket"
    assert json.loads(toolrun.call(catalog, "helpdesk_get_ticket", {"ticket_id": "T-1003"}).result)["status"] == "closed"


def test_a_server_that_cannot_start_is_a_problem_of_its_file_only(tmp_path: Path, tickets_dir: Path) -> None:
    shutil.copy(ROOT / "tools.d" / "flowers.yaml", tmp_path)
    shutil.copy(ROOT / "tools.d" / "flowers.py", tmp_path)
    write(tmp_path, "tickets.yaml", """
        mcp_server:
          command: [python, no_such_server.py]
        tools:
          - name: search_tickets
            confirm: true
    """)
    write(tmp_path, "typo.yaml", "# selects a tool the server does not have\n" + same_server(tickets_dir, tools=["serch_tickets"]))
    result = load_catalog(tmp_path)
    assert list(result.catalog.tools) == ["get_flower_inventory"]
    by_file = {Path(str(p.file)).name: p for p in result.problems}
    broken = by_file["tickets.yaml"]
    assert broken.line == 2 and "did not start" in broken.message
    assert "can't open file" in broken.message and "no_such_server.py" in broken.message  # the stderr tail
    assert "rest of the catalog still loads" in (broken.fix or "")
    typo = by_file["typo.yaml"]
    assert typo.line == 2 and "no tool matching 'serch_tickets'" in typo.message and typo.fix == "did you mean 'search_tickets'?"


def test_a_recipe_runs_on_the_servers_tools_with_the_scripted_model_and_one_connection(tmp_path: Path) -> None:
    tools = tmp_path / "tools.d"
    tools.mkdir()
    write(tools, "probe_server.py", PROBE_SERVER)
    write(tools, "probe.yaml", "mcp_server:\n  command: [python, probe_server.py]\n  timeout: 20s\n")
    recipe = write(tmp_path, "probe.yaml", """
        name: probe
        model: openai:gpt-4o-mini
        messages: [{user: Which process answers?}]
    """)
    pid_file = tools / "server.pid"
    killer: list[threading.Timer] = []

    def kill_during_the_next_call(request: Any) -> Any:
        timer = threading.Timer(0.5, os.kill, (int(pid_file.read_text()), signal.SIGKILL))
        timer.start()
        killer.append(timer)
        return ScriptedModel.calls([("slow", {"seconds": 20})])

    model = ScriptedModel([
        ScriptedModel.calls([("whoami", {}), ("whoami", {})]),
        ScriptedModel.calls([("whoami", {})]),
        kill_during_the_next_call,
        ScriptedModel.calls([("whoami", {})]),
        "done",
    ])
    result = toolrun.run(recipe, model=model)
    calls = [call for turn in result.turns for call in turn.tool_calls]
    first_pid = calls[0].result
    assert [c.result for c in calls[:3]] == [first_pid] * 3  # one connection served every call of the run
    died = calls[3]
    assert died.is_error and "stopped during the call (the next call starts it again)" in died.result
    assert died.duration_ms < 15_000
    restarted = calls[4]
    assert not restarted.is_error and restarted.result.isdigit() and restarted.result != first_pid
    assert result.final == "done"


def openai_tickets_model(request: Any) -> Any:
    """A fake Chat Completions endpoint: search, then read, then answer."""
    from tests.loopback import Reply

    body = request.json()
    tool_results = [m for m in body["messages"] if m["role"] == "tool"]
    steps = [("search_tickets", {"query": "checkout", "status": "open"}), ("get_ticket", {"ticket_id": "T-1001"})]
    if len(tool_results) < len(steps):
        name, arguments = steps[len(tool_results)]
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{len(tool_results)}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(arguments)}}]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": "T-1001 is open: checkout latency above 2 s in production."}
        finish = "stop"
    return Reply(body={"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4o-mini",
                       "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                       "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}})


def test_the_example_recipe_records_live_and_replays_offline(loopback: Any, tmp_path: Path, example: Path) -> None:
    recipe = example / "triage.yaml"
    cassette = tmp_path / "triage.cassette.json"
    server = loopback(openai_tickets_model)
    env = {"OPENAI_API_KEY": "sk-test-not-a-real-key", "OPENAI_BASE_URL": f"{server.url}/v1"}
    live = toolrun.run(recipe, mode="live", record=cassette, environ=env, stream=False)
    replayed = toolrun.run(recipe, replay=cassette, environ={})
    for result in (live, replayed):
        calls = [(c.name, c.is_error) for turn in result.turns for c in turn.tool_calls]
        assert calls == [("search_tickets", False), ("get_ticket", False)]
        assert result.final == "T-1001 is open: checkout latency above 2 s in production."
        assert not result.expect_failures
    assert replayed.mode == "replay" and not replayed.divergences and len(server.requests) == 3
    scripted = toolrun.run(recipe, model=f"scripted:{example / 'triage.script.yaml'}")
    assert not scripted.expect_failures and "T-1001" in scripted.final


def test_a_server_reached_over_http_with_a_secret_header(tmp_path: Path, team_mcp_server: Any) -> None:
    write(tmp_path, "remote.yaml", f"""
        mcp_server:
          url: {team_mcp_server.url}
          headers: {{Authorization: "Bearer ${{env:UPSTREAM_TOKEN}}"}}
          prefix: remote_
    """)
    os.environ["UPSTREAM_TOKEN"] = TEAM_TOKENS["upstream"]
    try:
        catalog = toolrun.load_catalog(tmp_path)
        assert list(catalog.tools) == ["remote_get_disk_usage", "remote_get_flower_inventory"]  # its client's tools
        out = toolrun.call(catalog, "remote_get_flower_inventory", {"city": "上海"})
    finally:
        del os.environ["UPSTREAM_TOKEN"]
    local = toolrun.call(toolrun.load_catalog(ROOT / "tools.d"), "get_flower_inventory", {"city": "上海"})
    assert (out.result, out.is_error) == (local.result, False)
    assert [e["tool"] for e in team_mcp_server.audit_entries() if e["client"] == "upstream"] == ["get_flower_inventory"]


WHO_SERVER = '''
import os
from mcp.server.mcpserver import MCPServer

server = MCPServer("who")

@server.tool(description="Returns the token this MCP server was started with, as text. Use it when asked which "
                         "token the server holds; do not use it for anything else. It changes nothing.")
def who() -> str:
    return "token=" + os.environ.get("TOK", "<none>")

@server.tool(description="Stops this MCP server at once, for tests. Use it only when asked to stop the server; "
                         "do not use it otherwise. It changes nothing else.")
def die() -> str:
    os._exit(3)

server.run()
'''


def test_a_shared_server_holds_the_process_secret_and_every_run_redacts_it(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A server outlives runs: it is started from the process environment, never from one run's
    ``environ`` (which another run would then see), and each run redacts what it was given."""
    monkeypatch.setenv("TOK", "process-SECRET-0000")
    write(tmp_path, "who_server.py", WHO_SERVER)
    write(tmp_path, "who.yaml", """
        mcp_server:
          command: [python, who_server.py]
          env: {TOK: "${env:TOK}"}
          timeout: 30s
    """)
    catalog = toolrun.load_catalog(tmp_path, lint=False)
    run_a = dict(os.environ, TOK="alpha-SECRET-1111")
    run_b = dict(os.environ, TOK="bravo-SECRET-2222")
    assert toolrun.call(catalog, "who", {}, environ=run_a).result == "token=***"
    assert toolrun.call(catalog, "die", {}, environ=run_b).is_error  # run B's call restarts it next time
    for environ in (run_b, run_a):
        out = toolrun.call(catalog, "who", {}, environ=environ)
        assert out.result == "token=***", out.result
        assert "SECRET" not in out.result


def test_a_server_that_cannot_start_never_shows_its_secrets_in_the_load_problem(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The load problem is printed by tools lint and sent to MCP clients as a log message, with no run to redact it."""
    monkeypatch.setenv("TOK", "boot-SECRET-3333")
    write(tmp_path, "loud_server.py", """
        import os, sys
        print("cannot start with token", os.environ["TOK"], file=sys.stderr)
        sys.exit(1)
    """)
    write(tmp_path, "loud.yaml", """
        mcp_server:
          command: [python, loud_server.py]
          env: {TOK: "${env:TOK}"}
          timeout: 30s
    """)
    result = load_catalog(tmp_path)
    [problem] = result.problems
    assert "cannot start with token ***" in problem.message
    assert "boot-SECRET-3333" not in str(problem)
