"""The mcp_server toolset: tools of an existing MCP server in the catalog and in runs.

The servers are real processes started by the backend over stdio (or ``toolrun mcp --http``
reached by URL): the ticket example's server, written with the SDK (one process, shared by the
module), and where a test needs a server of its own, the standard-library probe server of
tests/mcp_probe_server.py, which starts in milliseconds rather than an SDK import's seconds.
Each test's server has its own folder, so its own connection.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import toolrun
from tests.mcp_helpers import ROOT, TEAM_TOKENS
from tests.mcp_probe_server import copy_probe_server
from toolrun.catalog.lint import lint_catalog
from toolrun.catalog.loader import load_catalog
from toolrun.providers.scripted import ScriptedModel

pytestmark = pytest.mark.xdist_group("mcp-servers")  # loadgroup: the team server starts once, with test_mcp_server.py

def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def example() -> Path:
    """The ticket example as shipped (tools.d/tickets.yaml, its server, recipes/tickets.yaml). Its server
    starts once: the backend keeps one connection per server (same command, folder and settings), which
    every test here shares, and test_mcp_server.py's calls from this process (the same xdist group) too."""
    return ROOT


@pytest.fixture(scope="module")
def tickets_dir(example: Path) -> Path:
    return example / "tools.d"


def same_server(tickets_dir: Path, **more: Any) -> str:
    """An mcp_server mapping (flow style) that reaches the example's server process, so its connection."""
    settings = {"command": ["python", "ticket_server.py"], "cwd": str(tickets_dir), "timeout": "20s", **more}
    return "mcp_server: " + json.dumps(settings)


def test_the_example_servers_tools_load_and_lint_like_our_own(tickets_dir: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(tmp_path / "cache"))  # no listing kept: the server lists them now
    catalog = toolrun.load_catalog(tickets_dir)
    served = [name for name, tool in catalog.tools.items() if tool.backend.kind == "mcp_server"]
    assert served == ["search_tickets", "get_ticket", "close_ticket"]
    search = catalog.tools["search_tickets"]
    assert search.backend.kind == "mcp_server" and search.backend.config["tool"] == "search_tickets"
    assert search.parameters["properties"]["status"]["enum"] == ["open", "closed", "any"]
    assert search.parameters["required"] == ["query"]
    assert search.annotations is not None and search.annotations.read_only is True
    assert search.annotations.title == "Search tickets"
    assert search.timeout == 20.0  # mcp_server.timeout
    close = catalog.tools["close_ticket"]
    assert close.confirm is True and close.annotations is not None and close.annotations.destructive is True
    assert close.source.file == tickets_dir / "tickets.yaml" and close.source.line == 11  # its override's line
    assert [f for f in lint_catalog(catalog) if f.severity == "error"] == []
    assert list((tmp_path / "cache").glob("mcp-tools-*.json")), "the listing came from the cache, not the server"


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


def test_a_lone_surrogate_in_an_argument_is_refused_before_it_reaches_the_server(tickets_dir: Path) -> None:
    # The SDK's stdio writer failed on it: the session ended ("stopped during the call") and the server restarted.
    catalog = toolrun.load_catalog(tickets_dir)
    refused = toolrun.call(catalog, "search_tickets", {"query": "caf\udce9"})
    assert refused.is_error and refused.result.startswith(
        "refused: argument 'query' holds \\udce9, a lone UTF-16 surrogate (half of a \\u escape pair): it is no "
        "character, and the MCP server can only be sent UTF-8 text"), refused.result
    assert not toolrun.call(catalog, "search_tickets", {"query": "café"}).is_error


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
    assert "toolrun tools list --refresh tries it again" in (broken.fix or "")
    typo = by_file["typo.yaml"]
    assert typo.line == 2 and "no tool matching 'serch_tickets'" in typo.message and typo.fix == "did you mean 'search_tickets'?"


def test_a_recipe_runs_on_the_servers_tools_with_the_scripted_model_and_one_connection(tmp_path: Path) -> None:
    tools = tmp_path / "tools.d"
    tools.mkdir()
    copy_probe_server(tools)
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


def cli(args: list[str]) -> Any:
    """The toolrun command line, in this process (click's runner): whether it starts a server is the point,
    and a server it starts is this process's (its pid file says so)."""
    from click.testing import CliRunner

    from toolrun.cli import main

    return CliRunner().invoke(main, args)


def probe_project(tmp_path: Path, selection: str) -> tuple[Path, Path]:
    """A tools.d with the probe server (which writes server.pid once started) selected by ``selection``,
    and a python tool of our own; returns the folder and the pid file."""
    tools = tmp_path / "tools.d"
    tools.mkdir()
    copy_probe_server(tools)
    write(tools, "probe.yaml", f"mcp_server:\n  command: [python, probe_server.py]\n  tools: {selection}\n  timeout: 20s\n")
    write(tools, "local.py", "def today() -> str:\n    return 'Tuesday'\n")
    write(tools, "local.yaml", """
        name: what_day
        description: Returns the name of today's weekday, like Tuesday. Use it when the user asks which day it is;
          do not use it for dates or times.
        parameters: {type: object, properties: {}, additionalProperties: false}
        backend: {python: "local.py:today"}
    """)
    return tools, tools / "server.pid"


def recipe_using(tmp_path: Path, tools: str, not_called: str = "[]") -> Path:
    return write(tmp_path, "recipe.yaml", f"""
        name: probe
        model: openai:gpt-4o-mini
        tools: {tools}
        messages: [{{user: Which day is it?}}]
        expect: {{tools_not_called: {not_called}}}
    """)


def test_a_run_that_needs_none_of_a_servers_named_tools_does_not_start_it(tmp_path: Path) -> None:
    tools, pid_file = probe_project(tmp_path, "[whoami, slow]")
    model = ScriptedModel([ScriptedModel.calls([("what_day", {})]), "Tuesday."])
    result = toolrun.run(recipe_using(tmp_path, "[what_day]"), model=model)
    assert result.final == "Tuesday." and not pid_file.exists()  # the server never ran

    called = cli(["call", "what_day", "--tools-dir", str(tools)])
    assert called.exit_code == 0 and called.stdout.strip() == "Tuesday" and not pid_file.exists()

    shown = cli(["recipe", str(recipe_using(tmp_path, "[what_day]")), "--model", "scripted:" + str(
        write(tmp_path, "turns.yaml", "- tool_calls: [{name: what_day, arguments: {}}]\n- text: Tuesday.\n"))])
    assert shown.exit_code == 0 and not pid_file.exists()
    assert f"toolrun: 1 tool from {tools} (+2 tools of an MCP server not needed here, not started)" in shown.stderr

    # A typo still gets its did-you-mean from the names the file lists, without starting the server.
    with pytest.raises(toolrun.UserError, match="did you mean 'whoami'"):
        toolrun.run(recipe_using(tmp_path, "[whoam]"), model=ScriptedModel(["no"]))
    assert not pid_file.exists()


def test_an_unstarted_server_file_is_kept_in_the_cache_and_loaded_again_when_wanted(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from toolrun.backends.mcp_server import server_hub
    from toolrun.catalog import loader

    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(tmp_path / "cache"))
    tools, pid_file = probe_project(tmp_path, "[whoami, slow]")
    old = time.time_ns() - 3_600_000_000_000  # files written just now are never kept
    for file in tools.iterdir():
        os.utime(file, ns=(old, old))
    parsed: list[str] = []
    real = loader.load_tool_file

    def counting(file: Path, **options: Any) -> Any:
        parsed.append(file.name)
        return real(file, **options)

    monkeypatch.setattr(loader, "load_tool_file", counting)
    for _ in range(2):
        toolrun.run(recipe_using(tmp_path, "[what_day]"), model=ScriptedModel(["fine"]))
    assert parsed == ["local.yaml", "probe.yaml"] and not pid_file.exists()  # the second run read neither
    result = toolrun.run(recipe_using(tmp_path, "[whoami]"), model=ScriptedModel([ScriptedModel.calls([("whoami", {})]),
                                                                                "done"]))
    assert parsed[2:] == ["probe.yaml"] and pid_file.exists()
    assert result.turns[0].tool_calls[0].result == pid_file.read_text()

    # The lint of the server's tools is never one kept with the names: a description changed in the
    # server since is seen (here: its tools' lint findings, then again after the server changed).
    from toolrun.catalog.gate import load_checked_catalog

    linted = load_checked_catalog(tools)  # this process's server, still the one that ran whoami
    assert not [f for f in linted.findings if f.rule == "description-too-short"]

    def short_description_findings() -> list[str]:  # as a new process would: the server starts afresh
        server_hub().close_where(lambda spec: spec.cwd == str(tools))
        linted = cli(["tools", "lint", "--tools-dir", str(tools), "--json"])
        return sorted(f["tool"] for f in json.loads(linted.stdout)["findings"] if f["rule"] == "description-too-short")

    server = tools / "probe_server.py"
    server.write_text(server.read_text(encoding="utf-8").replace(
        '"whoami": (WHOAMI_DESCRIPTION,', '"whoami": ("Pid.",'), encoding="utf-8")
    assert '"whoami": ("Pid.",' in server.read_text(encoding="utf-8")
    assert short_description_findings() == ["whoami"]


@pytest.mark.parametrize("recipe_tools, not_called", [("[whoami]", "[]"), ("['who*']", "[]"), ("[what_day]", "[slow]")])
def test_a_run_that_may_use_one_of_its_tools_starts_it(tmp_path: Path, recipe_tools: str, not_called: str) -> None:
    _, pid_file = probe_project(tmp_path, "[whoami, slow]")
    result = toolrun.run(recipe_using(tmp_path, recipe_tools, not_called), model=ScriptedModel(["fine"]))
    assert result.final == "fine" and pid_file.exists()


def test_a_server_whose_tools_are_chosen_by_glob_starts_only_for_a_name_not_found_elsewhere(tmp_path: Path) -> None:
    _, pid_file = probe_project(tmp_path, "['who*']")  # its names are known only to the server
    toolrun.run(recipe_using(tmp_path, "[what_day]"), model=ScriptedModel(["fine"]))
    assert not pid_file.exists()  # what_day is found in local.yaml: the server is not asked
    toolrun.run(recipe_using(tmp_path, "[what_day, whoami]"), model=ScriptedModel(["fine"]))
    assert pid_file.exists()


def test_an_unstarted_servers_names_still_clash_with_other_files(tmp_path: Path) -> None:
    tools, pid_file = probe_project(tmp_path, "[whoami, what_day]")  # what_day is local.yaml's name too
    with pytest.raises(toolrun.LoadError) as caught:
        toolrun.run(recipe_using(tmp_path, "[slow_not_here]"), model=ScriptedModel(["no"]))
    assert any("duplicate tool name 'what_day'" in str(problem) for problem in caught.value.problems)
    assert not pid_file.exists()


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
    recipe = example / "recipes" / "tickets.yaml"
    cassette = tmp_path / "tickets.cassette.json"
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
    scripted = toolrun.run(recipe, model=f"scripted:{example / 'recipes' / 'tickets.script.yaml'}")
    assert not scripted.expect_failures and "T-1001" in scripted.final


def test_a_server_reached_over_http_with_a_secret_header(tmp_path: Path, team_mcp_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                         seed_tools_d_listings: Callable[[Path], Path]) -> None:
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(seed_tools_d_listings(tmp_path / "cache")))  # tools.d loads without its ticket server
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


def test_a_shared_server_holds_the_process_secret_and_every_run_redacts_it(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A server outlives runs: it is started from the process environment, never from one run's
    ``environ`` (which another run would then see), and each run redacts what it was given."""
    monkeypatch.setenv("TOK", "process-SECRET-0000")
    copy_probe_server(tmp_path)  # its tools who and die
    write(tmp_path, "who.yaml", """
        mcp_server:
          command: [python, probe_server.py]
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


def test_a_mistake_in_the_file_is_reported_and_a_tool_with_a_broken_override_is_not_served(tmp_path: Path,
                                                                                          tickets_dir: Path) -> None:
    write(tmp_path, "typo.yaml", "mcp_server:\n  comand: [python, ticket_server.py]\n")
    write(tmp_path, "tickets.yaml", same_server(tickets_dir) + textwrap.dedent("""
        tools:
          - name: close_ticket
            confirm: sure
          - name: get_ticket
            timeout: 5x
    """))
    result = load_catalog(tmp_path)
    messages = {(Path(str(p.file)).name, p.line): p.message for p in result.problems}
    assert "unknown key 'comand' in mcp_server" in messages[("typo.yaml", 2)]
    assert "tools[0].confirm" in messages[("tickets.yaml", 4)]
    assert "tools[1].timeout" in messages[("tickets.yaml", 6)]
    # Served without its override, close_ticket would run without anyone's approval.
    assert list(result.catalog.tools) == ["search_tickets"]


def test_a_server_that_refuses_the_token_says_so(tmp_path: Path, team_mcp_server: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WRONG_TOKEN", "not-a-known-SECRET-token")
    write(tmp_path, "remote.yaml", f"""
        mcp_server:
          url: {team_mcp_server.url}
          headers: {{Authorization: "Bearer ${{env:WRONG_TOKEN}}"}}
    """)
    [problem] = load_catalog(tmp_path).problems
    assert "HTTP 401 Unauthorized — check the token in headers" in problem.message
    assert "SECRET" not in str(problem)


CHATTY_SERVER = """\
import json, sys
import probe_server

sys.stdout.write("probe server ready (a banner on stdout, not JSON-RPC)\\n")
sys.stdout.flush()
if sys.argv[1:] == ["--garbled-list"]:
    answer = probe_server._answer

    def garbled(request_id, method, params):
        if method != "tools/list":
            return answer(request_id, method, params)
        nested = "[" * 5000 + "]" * 5000  # valid JSON no reader of the SDK's takes
        sys.stdout.write('{"jsonrpc": "2.0", "id": %s, "result": {"tools": %s}}\\n' % (json.dumps(request_id), nested))
        sys.stdout.flush()

    probe_server._answer = garbled
probe_server.main()
"""


def test_a_line_the_client_cannot_read_is_no_traceback_and_named_when_it_is_why_nothing_came(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    tools = tmp_path / "tools.d"
    tools.mkdir()
    copy_probe_server(tools)
    write(tools, "chatty_server.py", CHATTY_SERVER)
    write(tools, "chatty.yaml", "mcp_server:\n  command: [python, chatty_server.py]\n  timeout: 20s\n")
    garbled = tmp_path / "garbled.d"
    garbled.mkdir()
    copy_probe_server(garbled)
    write(garbled, "chatty_server.py", CHATTY_SERVER)
    write(garbled, "garbled.yaml", "mcp_server:\n  command: [python, chatty_server.py, --garbled-list]\n  timeout: 1s\n")
    caplog.set_level("DEBUG")
    chatty = load_catalog(tools)
    assert chatty.problems == [] and "whoami" in chatty.catalog.tools  # the banner is passed over
    problem, = load_catalog(garbled).problems
    assert "did not list its tools within 1s; a message from it could not be read (Invalid JSON:" in problem.message
    assert [record.getMessage() for record in caplog.records if record.exc_info] == []  # printed as a traceback


def test_a_failure_the_sdk_logs_is_kept_by_its_connection_and_another_client_s_is_left_alone(
        caplog: pytest.LogCaptureFixture) -> None:
    # The SDK's transports log a broken POST ("Error in post_writer") with its traceback: on a toolrun connection
    # that is kept, in one line, for the error message; the same logger used by another client in the process
    # (an application that embeds toolrun and uses the SDK itself) still logs as it did.
    import asyncio
    import logging

    from toolrun.backends import mcp_server

    connection = mcp_server._Connection(mcp_server.ServerSpec(url="http://127.0.0.1:9/mcp"))
    logger = logging.getLogger("mcp.client.streamable_http")

    async def post_writer() -> None:
        try:
            raise ConnectionRefusedError("connection refused")
        except ConnectionRefusedError:
            logger.exception("Error in post_writer")

    async def held() -> None:
        mcp_server.CURRENT_CONNECTION.set(connection)  # as hold() does in the task that holds the session
        await asyncio.get_running_loop().create_task(post_writer())  # the SDK's task, started from there

    caplog.set_level("DEBUG", logger="mcp.client.streamable_http")
    asyncio.run(held())
    assert connection.failure_note() == "; Error in post_writer: ConnectionRefusedError: connection refused"
    def sdk_records() -> list[str]:
        return [record.getMessage() for record in caplog.records if record.name.startswith("mcp.")]

    assert sdk_records() == []  # not printed: with no logging set up, a traceback on stderr
    asyncio.run(post_writer())  # no toolrun connection in this context
    assert sdk_records() == ["Error in post_writer"]


def test_a_secret_where_the_one_line_failure_is_cut_short_is_not_shown_in_part() -> None:
    import asyncio
    import logging

    from toolrun.backends import mcp_server

    secret = "sk-live-" + "SECRET" * 10
    connection = mcp_server._Connection(mcp_server.ServerSpec(url="http://127.0.0.1:9/mcp"))
    connection.secrets = (secret,)
    failure = ConnectionRefusedError("x" * 130 + " token " + secret)  # the line is cut (200) inside the secret

    async def held() -> None:
        mcp_server.CURRENT_CONNECTION.set(connection)
        try:
            raise failure
        except ConnectionRefusedError:
            logging.getLogger("mcp.client.streamable_http").exception("Error in post_writer")
        await connection._on_message(failure)

    asyncio.run(held())
    assert "sk-live" not in connection.failure_note() and "sk-live" not in str(connection.unreadable)
    assert connection.transport_error and connection.transport_error.startswith("Error in post_writer: ConnectionRefusedError: xxx")


# A server whose tools/list mixes tools the protocol's types accept with ones they reject, two a page
# (--good-only: only the others). Its whoami answers as the probe server's; bad_result answers a result
# with no content list.
MIXED_SERVER = """\
import os, sys
import probe_server

GOOD = [{"name": name, "description": text, "inputSchema": schema} for name, (text, schema) in probe_server.TOOLS.items()]
BAD_RESULT = {"name": "bad_result", "description": "Answers a result that is no CallToolResult.", "inputSchema": {"type": "object"}}
TOOLS = [GOOD[0], {"name": "no_schema", "description": "x"}, GOOD[1],
         {"name": "string_schema", "description": "x", "inputSchema": os.environ.get("TOK", "object")},
         {"name": "array_schema", "description": "x", "inputSchema": {"type": "array"}}, BAD_RESULT]
if sys.argv[1:] == ["--good-only"]:
    TOOLS = [GOOD[0], BAD_RESULT]
answer = probe_server._answer


def mixed(request_id, method, params):
    if method == "tools/list" and os.environ.get("LISTINGS"):
        with open(os.environ["LISTINGS"], "a") as listings:
            listings.write("tools/list\\n")
    if method == "tools/list":
        if sys.argv[1:] == ["--looping-cursor"]:
            page, cursor = TOOLS[:2], "same"
        else:
            start = int(params.get("cursor") or 0)
            page, cursor = TOOLS[start:start + 2], str(start + 2) if start + 2 < len(TOOLS) else None
        result = {"tools": page, **({"nextCursor": cursor} if cursor else {})}
        if sys.argv[1:] == ["--tools-not-a-list"]:
            result = {"tools": "all of them"}
        return probe_server._send({"jsonrpc": "2.0", "id": request_id, "result": result})
    if method == "tools/call" and params.get("name") == "bad_result":
        return probe_server._send({"jsonrpc": "2.0", "id": request_id, "result": {"content": "not a list"}})
    return answer(request_id, method, params)


probe_server._answer = mixed
probe_server.main()
"""


def mixed_server(folder: Path, *arguments: str, env: str = "") -> Path:
    """A tools folder with the mixed server as its one toolset, ``mixed.yaml``."""
    folder.mkdir()
    copy_probe_server(folder)
    write(folder, "mixed_server.py", MIXED_SERVER)
    command = json.dumps(["python", "mixed_server.py", *arguments])
    return write(folder, "mixed.yaml", f"mcp_server:\n  command: {command}\n  timeout: 20s\n{env}")


def test_a_tool_the_protocol_rejects_costs_only_that_tool_and_is_one_line_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolrun.backends.mcp_server import server_hub

    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TOK", "schema-SECRET-4444")  # the server lists string_schema with it as its inputSchema
    tools = tmp_path / "tools.d"
    toolset = mixed_server(tools, env='  env: {TOK: "${env:TOK}"}\n')
    result = load_catalog(tools)
    assert list(result.catalog.tools) == ["whoami", "slow", "bad_result"]  # every page read, past the bad tools
    assert [(p.file, p.line) for p in result.problems] == [(toolset, 1)] * 3
    messages = [p.message for p in result.problems]
    assert messages == ["the server's tool 'no_schema' cannot be used: inputSchema is missing",
                        "the server's tool 'string_schema' cannot be used: inputSchema: should be an object, got \"***\"",
                        "the server's tool 'array_schema' cannot be used: inputSchema.type: should be 'object', got \"array\""]
    assert all("mcp_server.tools" in (p.fix or "") for p in result.problems)
    assert "SECRET" not in str(result.problems)
    with pytest.raises(toolrun.LoadError, match="the server's tool 'no_schema' cannot be used"):  # not "unknown tool"
        toolrun.run(recipe_using(tmp_path, "[no_schema]"), model=ScriptedModel(["no"]))

    pid = toolrun.call(result.catalog, "whoami", {})
    assert not pid.is_error and pid.result.isdigit()
    # A new session (as in the next command, the tools from the cache): the SDK checks each result against
    # its tool's output schema, and the session must know the tools without listing the server whole.
    server_hub().close_where(lambda spec: spec.cwd == str(tools))
    cached = load_catalog(tools)
    assert list(cached.catalog.tools) == ["whoami", "slow", "bad_result"] and len(cached.problems) == 3
    again = toolrun.call(cached.catalog, "whoami", {})
    assert not again.is_error and again.result.isdigit() and again.result != pid.result, again.result


def test_calls_that_come_together_on_a_new_session_wait_for_one_listing(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from toolrun.backends.mcp_server import server_hub

    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(tmp_path / "cache"))
    listings = tmp_path / "listings.txt"
    tools = tmp_path / "tools.d"
    mixed_server(tools, "--good-only", env=f"  env: {{LISTINGS: {json.dumps(str(listings))}}}\n")
    assert list(load_catalog(tools).catalog.tools) == ["whoami", "bad_result"]
    server_hub().close_where(lambda spec: spec.cwd == str(tools))
    listings.unlink()
    cached = load_catalog(tools).catalog  # from the cache: the next session has not listed its tools
    recipe = write(tmp_path, "recipe.yaml", """
        name: together
        model: openai:gpt-4o-mini
        tools: [whoami]
        messages: [{user: Who are you?}]
    """)
    model = ScriptedModel([ScriptedModel.calls([("whoami", {}), ("whoami", {}), ("whoami", {})]), "done"])
    calls = toolrun.run(recipe, model=model, catalog=cached).turns[0].tool_calls
    assert [call.is_error for call in calls] == [False] * 3 and len({call.result for call in calls}) == 1
    assert listings.read_text().splitlines() == ["tools/list"]  # one session, listed once for its three calls


def test_a_long_secret_the_server_lists_as_a_tool_s_schema_is_not_shown_in_part(tmp_path: Path,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRUN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TOK", "sk-live-" + "SECRET" * 10)  # longer than a value the one-line problem repeats
    tools = tmp_path / "tools.d"
    mixed_server(tools, env='  env: {TOK: "${env:TOK}"}\n')
    messages = [problem.message for problem in load_catalog(tools).problems]
    assert "the server's tool 'string_schema' cannot be used: inputSchema: should be an object" in messages
    assert "sk-live" not in str(messages)


def test_a_call_result_the_protocol_rejects_reaches_the_model_as_one_line(tmp_path: Path) -> None:
    tools = tmp_path / "tools.d"
    mixed_server(tools, "--good-only")
    catalog = load_catalog(tools).catalog
    model = ScriptedModel([ScriptedModel.calls([("bad_result", {})]), "done"])
    recipe = write(tmp_path, "recipe.yaml", """
        name: bad
        model: openai:gpt-4o-mini
        tools: [bad_result]
        messages: [{user: Call it.}]
    """)
    [call] = toolrun.run(recipe, model=model, catalog=catalog).turns[0].tool_calls
    assert call.is_error
    assert call.result == ("the MCP server python mixed_server.py --good-only answered the call with a result toolrun cannot "
                           "read: content: should be an array, got \"not a list\"")


@pytest.mark.parametrize("argument, message", [
    ("--tools-not-a-list", "failed to list its tools: ValidationError: tools: should be an array, got \"all of them\""),
    ("--looping-cursor", "failed to list its tools: ValueError: its tools/list gave the cursor 'same' twice (a paging loop)"),
])
def test_a_tool_list_the_protocol_rejects_as_a_whole_is_a_one_line_problem(tmp_path: Path, argument: str,
                                                                            message: str) -> None:
    tools = tmp_path / "tools.d"
    mixed_server(tools, argument)
    [problem] = load_catalog(tools).problems
    assert problem.message == f"the MCP server python mixed_server.py {argument} {message}"


def test_a_url_that_answers_json_but_no_mcp_is_a_one_line_problem(tmp_path: Path, loopback: Any) -> None:
    from tests.loopback import Reply

    server = loopback(lambda request: Reply(body={"status": "ok", "service": "billing"}))
    write(tmp_path, "remote.yaml", f"mcp_server:\n  url: {server.url}/api\n  timeout: 10s\n")
    [problem] = load_catalog(tmp_path).problems
    assert problem.message == (f"the MCP server {server.url}/api did not start: MCPError: Failed to parse JSON response: "
                               "JSONRPCRequest.jsonrpc is missing (and 10 more) — is the url the server's MCP endpoint? "
                               "a legacy HTTP+SSE server's url ends in /sse")


@pytest.mark.parametrize("garbled", ["tools/list", "tools/call"])
def test_an_answer_that_is_no_json_after_the_handshake_is_no_traceback(tmp_path: Path, loopback: Any, garbled: str,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    # The streamable HTTP client reads a request's answer in the context of the task that sent it (toolrun's
    # listing or call, not the task that holds the session), and logs one it cannot parse with its traceback.
    from tests.loopback import Recorded, Reply

    def answer(request: Recorded) -> Reply:
        message = request.json() if request.method == "POST" else {}
        if request.method != "POST" or "id" not in message:
            return Reply(status=202 if request.method == "POST" else 405, body="")
        if message["method"] == garbled:
            return Reply(body="{not json", headers={"Content-Type": "application/json"})
        result = ({"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                   "serverInfo": {"name": "garbled", "version": "1"}} if message["method"] == "initialize"
                  else {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
        return Reply(body={"jsonrpc": "2.0", "id": message["id"], "result": result})

    server = loopback(answer)
    write(tmp_path, "remote.yaml", f"mcp_server:\n  url: {server.url}/mcp\n  timeout: 5s\n")
    caplog.set_level("DEBUG", logger="mcp.client")
    result = load_catalog(tmp_path)
    if garbled == "tools/call":
        assert not result.problems
        outcome = toolrun.call(result.catalog, "echo", {})
        assert outcome.is_error and outcome.result.endswith(  # pydantic's error of the whole input: no location line
            "refused the call: MCPError: Failed to parse JSON response: Invalid JSON: key must be a string at line 1 column 2")
    else:
        [problem] = result.problems
        assert "failed to list its tools" in problem.message
    assert [record.getMessage() for record in caplog.records if record.exc_info] == []  # printed as a traceback
