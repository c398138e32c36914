"""``toolrun mcp`` driven by the official MCP client, over stdio and streamable HTTP, in both protocol eras.

Every listed Tool and CallToolResult is checked against the protocol's JSON Schema
(2025-11-25 and 2026-07-28, tests/fixtures/specs/). Servers are real processes. Starting
one costs seconds (the SDK's import), so the module's sessions are opened once, all at
once, in an event loop of their own (``portal``) and closed at the end; the HTTP server
is the session's ``team_mcp_server`` (tests/conftest.py).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

import toolrun
from tests.mcp_helpers import (
    ECHO_PY,
    ROOT,
    SLEEPER_TOOL,
    TEAM_TOKENS,
    assert_valid,
    blocking_portal,
    echo_tool,
    open_sessions,
    server_env,
    toolrun_mcp_argv,
    wire,
)
from toolrun.core.errors import UserError
from toolrun.mcp import serve

pytestmark = pytest.mark.xdist_group("mcp-servers")  # loadgroup: its servers start once, on one worker
TOOLS_D = ROOT / "tools.d"
EXAMPLE_CALLS: dict[str, dict[str, Any]] = {
    "get_flower_inventory": {"city": "北京"},
    "get_disk_usage": {"path": "/"},
    "list_largest_directories": {"path": str(ROOT / "tools.d"), "count": 3},
    "get_service_status": {"service": "checkout"},  # OPS_API_URL is unset: an error result, the same both ways
    "list_recent_deployments": {"service": "checkout"},
    "search_tickets": {"query": "checkout"},  # tools.d/tickets.yaml: served on from its own MCP server
    "get_ticket": {"ticket_id": "T-1001"},
}
TICKET_TOOLS = ("search_tickets", "get_ticket")
COPIED_EXAMPLES = ("disk.yaml", "flowers.yaml", "flowers.py", "ops_api.yaml")  # tools.d but the ticket example
MODES = ["legacy", "auto"]  # the initialize handshake of 2025-11-25; "auto" discovers 2026-07-28's per-request envelope
RESTART = {"service": "checkout", "environment": "staging", "reason": "stuck after the config push"}


def stdio(tools_dir: Path, *args: str, cache: Path) -> StdioServerParameters:
    """A ``toolrun mcp`` over stdio whose catalog cache is ``cache``."""
    argv = toolrun_mcp_argv("--tools-dir", str(tools_dir), *args)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=server_env({"TOOLRUN_CACHE_DIR": str(cache)}),
                                 cwd=str(ROOT))


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def echo_tools(folder: Path) -> Path:
    write(folder, "echo.py", ECHO_PY)
    write(folder, "echo.yaml", echo_tool("echo"))
    return folder


class Responder:
    """The client's user answering elicitation: ``answer`` True/False approves/denies, None declines the form."""

    def __init__(self) -> None:
        self.answer: bool | None = None
        self.asked: list[str] = []
        self.requests: list[dict[str, Any]] = []  # as they travelled, to check against the protocol's schemas

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append(params.message)
        self.requests.append(wire(params))
        if self.answer is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"approve": self.answer})


@pytest.fixture(scope="module")
def portal() -> Iterator[Any]:
    with blocking_portal() as portal:
        yield portal


@pytest.fixture(scope="module")
def user() -> Responder:
    return Responder()


@pytest.fixture(scope="module")
def echo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The echo and sleeper tools beside a copy of tools.d without its ticket example: a folder the tests
    may change, served to a 2025-11-25 client ("echo") and to a 2026-07-28 one ("auto")."""
    folder = echo_tools(tmp_path_factory.mktemp("echo"))
    write(folder, "sleeper.yaml", SLEEPER_TOOL.format(pid_file=folder / "sleeper.pid"))
    for name in COPIED_EXAMPLES:
        shutil.copy(TOOLS_D / name, folder / name)
    return folder


class EchoEvents:
    """What the echo directory's 2025-11-25 client heard: list changes and log messages."""

    def __init__(self) -> None:
        self.changed: anyio.Event | None = None
        self.logged: list[str] = []
        self.notifications: list[tuple[str, dict[str, Any]]] = []  # (schema definition, as it travelled)

    async def on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.notifications.append(("ToolListChangedNotification", {"jsonrpc": "2.0", **wire(message)}))
            if self.changed is not None:
                self.changed.set()

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logged.append(str(params.data))
        self.notifications.append(("LoggingMessageNotificationParams", wire(params)))


@pytest.fixture(scope="module")
def echo_events() -> EchoEvents:
    return EchoEvents()


@pytest.fixture(scope="module")
def sessions(portal: Any, user: Responder, echo_dir: Path, echo_events: EchoEvents, tmp_path_factory: pytest.TempPathFactory,
             seed_tools_d_listings: Callable[[Path], Path]) -> Iterator[dict[str, Client]]:
    """The module's clients, each with a server of its own. The servers' cache holds the ticket server's
    tool list, as after a user's first command: a server starts the ticket server only to call it (each
    start costs an SDK import), not to learn its names. The 2025-11-25 clients are served by the lean
    stdio server, the 2026-07-28 one ("auto") by the SDK's, another SDK import: one such server (of
    ``echo_dir``) serves every 2026-07-28 test. Tool selection and --yes are the catalog's, the same
    under both, so "yes" is a lean one."""
    cache = seed_tools_d_listings(tmp_path_factory.mktemp("mcp-server-cache"))
    clients = {
        "legacy": Client(stdio(TOOLS_D, cache=cache), mode="legacy", elicitation_callback=user),
        "auto": Client(stdio(echo_dir, cache=cache), mode="auto", elicitation_callback=user),
        "no-elicitation": Client(stdio(TOOLS_D, cache=cache), mode="legacy"),
        "yes": Client(stdio(TOOLS_D, "--yes", "--tools", "get_*", "--tools", "restart_*", cache=cache), mode="legacy"),
        "echo": Client(stdio(echo_dir, cache=cache), mode="legacy", message_handler=echo_events.on_message,
                       logging_callback=echo_events.on_log),
    }
    with open_sessions(portal, clients) as opened:
        yield opened


@pytest.fixture
def asked(user: Responder) -> Iterator[Responder]:
    user.asked.clear()
    user.requests.clear()
    yield user
    user.answer = None


# ---------------------------------------------------------------- stdio


@pytest.mark.parametrize("mode", MODES)
def test_stdio_lists_the_catalog_and_calls_each_example_tool_like_toolrun_call(mode: str, portal: Any, echo_dir: Path,
                                                                               sessions: dict[str, Client]) -> None:
    catalog = toolrun.load_catalog(TOOLS_D if mode == "legacy" else echo_dir)
    client = sessions[mode]

    async def check() -> None:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        assert client.server_capabilities.tools is not None and client.server_capabilities.tools.list_changed
        listed = await client.list_tools()
        assert_valid("ListToolsResult", wire(listed))
        assert [tool.name for tool in listed.tools] == [tool.name for tool in catalog]
        for tool in listed.tools:
            assert_valid("Tool", wire(tool))
        flowers = wire(next(t for t in listed.tools if t.name == "get_flower_inventory"))
        assert flowers["title"] == "Flower stock by city"
        assert flowers["annotations"] == {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True,
                                          "openWorldHint": False, "title": "Flower stock by city"}
        assert flowers["inputSchema"] == catalog.tools["get_flower_inventory"].parameters
        assert flowers["description"] == catalog.tools["get_flower_inventory"].description
        # The ticket tools (a server of their own behind toolrun, started by the first call: an SDK import) in
        # legacy mode only (the auto client's folder has not got them): relaying a call does not depend on the
        # protocol the client speaks.
        calls = {name: arguments for name, arguments in EXAMPLE_CALLS.items()
                 if mode == "legacy" or name not in TICKET_TOOLS}
        for name, arguments in calls.items():
            result = await client.call_tool(name, arguments)
            assert_valid("CallToolResult", wire(result))
            expected = await toolrun.acall(catalog, name, arguments)
            assert result.is_error is expected.is_error, name
            assert [block.text for block in result.content] == [expected.result], name

    portal.call(check)


@pytest.mark.parametrize("mode", MODES)
def test_bad_arguments_and_failures_are_error_results_and_unknown_tools_a_protocol_error(
        mode: str, portal: Any, sessions: dict[str, Client]) -> None:
    client = sessions[mode]

    async def check() -> None:
        bad = await client.call_tool("get_flower_inventory", {"city": "Paris"})
        assert_valid("CallToolResult", wire(bad))
        assert bad.is_error is True
        assert bad.content[0].text == ('invalid arguments for get_flower_inventory: at $.city: '
                                       'expected one of ["北京", "上海", "深圳"], got "Paris"')
        mistyped = await client.call_tool("get_disk_usage", {"path": 7})
        assert mistyped.is_error and "at $.path: expected string, got 7" in mistyped.content[0].text
        failing = await client.call_tool("get_service_status", {"service": "checkout"})
        assert failing.is_error and "OPS_API_URL" in failing.content[0].text
        deep: Any = "x"
        for _ in range(100):  # deeper than a call may send; walking it by recursion is how servers fall over
            deep = {"a": deep}
        nested = await client.call_tool("get_disk_usage", {"path": "/", "extra": deep})
        assert nested.is_error and nested.content[0].text == ("invalid arguments for get_disk_usage: at $: the arguments "
                                                              "nest deeper than 64 levels, more than a call may "
                                                              "send")
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("get_flower_inventroy", {"city": "北京"})
        assert unknown.value.code == types.INVALID_PARAMS and "get_flower_inventroy" in str(unknown.value)
        assert (await client.call_tool("get_flower_inventory", {"city": "上海"})).is_error is False

    portal.call(check)


@pytest.mark.parametrize("session", ["echo", "auto"])  # served by the lean server, and by the SDK's
def test_a_json_object_result_is_also_structured_content(session: str, portal: Any, sessions: dict[str, Client]) -> None:
    async def check() -> None:
        result = await sessions[session].call_tool("echo", {"text": "北京"})
        assert_valid("CallToolResult", wire(result))
        assert result.structured_content == {"text": "北京", "length": 2}
        assert json.loads(result.content[0].text) == {"text": "北京", "length": 2}

    portal.call(check)


def test_tools_selects_by_glob_and_yes_approves_without_asking(portal: Any, sessions: dict[str, Client]) -> None:
    client = sessions["yes"]

    async def check() -> None:
        names = [tool.name for tool in (await client.list_tools()).tools]
        # get_ticket comes from tools.d/tickets.yaml's MCP server: its names (cached) match the selection
        assert names == ["get_disk_usage", "get_flower_inventory", "get_service_status", "restart_service", "get_ticket"]
        with pytest.raises(MCPError):
            await client.call_tool("list_recent_deployments", {"service": "checkout"})
        allowed = await client.call_tool("restart_service", RESTART)
        assert allowed.is_error and "OPS_API_URL" in allowed.content[0].text  # it ran; the API is not configured here

    portal.call(check)


# ---------------------------------------------------------------- approval


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_that_needs_approval_asks_the_clients_user(mode: str, portal: Any, sessions: dict[str, Client],
                                                          asked: Responder) -> None:
    client = sessions[mode]

    async def check() -> None:
        asked.answer = False
        denied = await client.call_tool("restart_service", RESTART)
        assert_valid("CallToolResult", wire(denied))
        assert denied.is_error and denied.content[0].text == "the user denied this call"
        assert len(asked.asked) == 1 and "restart_service" in asked.asked[0] and '"environment": "staging"' in asked.asked[0]
        invalid = await client.call_tool("restart_service", {"service": "checkout"})
        assert invalid.is_error and "missing required property" in invalid.content[0].text
        assert len(asked.asked) == 1, "a call with invalid arguments must not ask anyone"
        asked.answer = None
        declined = await client.call_tool("restart_service", RESTART)
        assert declined.content[0].text == "the user denied this call"
        asked.answer = True
        approved = await client.call_tool("restart_service", RESTART)
        assert approved.is_error and "OPS_API_URL" in approved.content[0].text  # it ran: the API is not configured here
        assert len(asked.asked) == 3

    portal.call(check)
    for request in asked.requests:
        assert_valid("ElicitRequestFormParams", request)


def test_without_elicitation_approval_is_refused_with_the_way_out(portal: Any, sessions: dict[str, Client]) -> None:
    async def check() -> None:
        refused = await sessions["no-elicitation"].call_tool("restart_service", RESTART)
        assert_valid("CallToolResult", wire(refused))
        assert refused.is_error and "--yes" in refused.content[0].text and "elicitation" in refused.content[0].text

    portal.call(check)


# ---------------------------------------------------------------- progress and cancellation


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")  # a zombie has exited; only its parent has not collected it yet
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def test_a_long_call_reports_progress_and_cancelling_it_kills_its_process(portal: Any, sessions: dict[str, Client],
                                                                          echo_dir: Path) -> None:
    client = sessions["echo"]

    async def check() -> None:
        progress: list[str | None] = []
        first_progress = anyio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(message)
            first_progress.set()

        async with anyio.create_task_group() as tasks:
            async def call() -> None:
                await client.call_tool("sleep_long", {}, progress_callback=on_progress)

            tasks.start_soon(call)
            with anyio.fail_after(10):
                await first_progress.wait()
            tasks.cancel_scope.cancel()  # the client sends notifications/cancelled
        assert progress and "sleep_long is running" in (progress[0] or "")
        pid = int((echo_dir / "sleeper.pid").read_text())
        with anyio.fail_after(10):
            while _alive(pid):
                await anyio.sleep(0.05)
        assert not (await client.call_tool("echo", {"text": "still here"})).is_error

    portal.call(check)


# ---------------------------------------------------------------- reloading


def test_a_file_dropped_in_while_serving_is_listed_and_every_client_notified(
        portal: Any, sessions: dict[str, Client], echo_dir: Path, echo_events: EchoEvents) -> None:
    legacy, modern = sessions["echo"], sessions["auto"]

    async def check() -> None:
        async with modern.listen(tools_list_changed=True) as subscription:
            before = [t.name for t in (await legacy.list_tools()).tools]
            assert {"echo", "sleep_long"} <= set(before) and "echo_again" not in before
            echo_events.changed = anyio.Event()
            write(echo_dir, "echo2.yaml", echo_tool("echo_again"))
            with anyio.fail_after(10):
                await echo_events.changed.wait()  # the 2025-11-25 client: notifications/tools/list_changed
                async for _event in subscription:  # the 2026-07-28 client: an event on its listen stream
                    break
        added = before[:before.index("echo") + 1] + ["echo_again"] + before[before.index("echo") + 1:]  # echo2.yaml's
        for client in (legacy, modern):
            assert [t.name for t in (await client.list_tools()).tools] == added
            assert not (await client.call_tool("echo_again", {"text": "hi"})).is_error

        echo_events.changed = anyio.Event()
        write(echo_dir, "echo2.yaml", "name: echo_again\ndescriptoin: typo\n")
        with anyio.fail_after(10):
            await echo_events.changed.wait()
            while not any("descriptoin" in line for line in echo_events.logged):
                await anyio.sleep(0.02)
        assert all("echo2.yaml" in line for line in echo_events.logged)  # the broken file's problems, as log messages
        assert [t.name for t in (await legacy.list_tools()).tools] == before
        assert not (await legacy.call_tool("echo", {"text": "the other tools keep working"})).is_error
        (echo_dir / "echo2.yaml").unlink()

    portal.call(check)
    heard = {definition for definition, _ in echo_events.notifications}
    assert heard == {"ToolListChangedNotification", "LoggingMessageNotificationParams"}
    for definition, notification in echo_events.notifications:
        assert_valid(definition, notification, ("2025-11-25",))  # what the 2025-11-25 session heard


# ---------------------------------------------------------------- streamable HTTP


def http_client(url: str, token: str | None = None, **options: Any) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30)), **options)


@pytest.mark.parametrize("mode", MODES)
def test_http_serves_the_same_catalog_and_results(mode: str, team_mcp_server: Any) -> None:
    catalog = toolrun.load_catalog(TOOLS_D)

    async def check() -> None:
        async with http_client(team_mcp_server.url, TEAM_TOKENS["admin"], mode=mode) as client:
            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == [t.name for t in catalog]
            for tool in listed.tools:
                assert_valid("Tool", wire(tool))
            result = await client.call_tool("get_flower_inventory", {"city": "深圳"})
            assert_valid("CallToolResult", wire(result))
            expected = await toolrun.acall(catalog, "get_flower_inventory", {"city": "深圳"})
            assert (result.content[0].text, result.is_error) == (expected.result, False)
            bad = await client.call_tool("get_flower_inventory", {"city": f"{mode}-nowhere"})
            assert_valid("CallToolResult", wire(bad))
            assert bad.is_error and "at $.city: expected one of" in bad.content[0].text

    anyio.run(check)
    entries = [e for e in team_mcp_server.audit_entries() if e["arguments"] == {"city": f"{mode}-nowhere"}]
    assert len(entries) == 1 and set(entries[0]) == {"time", "client", "tool", "arguments", "is_error", "duration_ms"}
    assert (entries[0]["client"], entries[0]["tool"], entries[0]["is_error"]) == ("admin", "get_flower_inventory", True)


def test_http_admits_only_known_tokens_and_a_client_sees_and_calls_only_its_tools(team_mcp_server: Any) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in ({}, {"Authorization": "Bearer not-a-known-token"}, {"Authorization": TEAM_TOKENS["oncall-bot"]}):
        response = httpx.post(team_mcp_server.url, json=body, timeout=10, headers={**accept, **headers})
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"].startswith("Bearer")
    foreign = httpx.post(team_mcp_server.url, json=body, timeout=10,
                         headers={**accept, "Origin": "https://evil.example",
                                  "Authorization": f"Bearer {TEAM_TOKENS['admin']}"})
    assert foreign.status_code == 403

    token = TEAM_TOKENS["oncall-bot"]

    async def check() -> None:
        async with http_client(team_mcp_server.url, token, mode="legacy") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["get_disk_usage", "get_flower_inventory", "get_service_status", "get_ticket"]
            with pytest.raises(MCPError) as hidden:
                await client.call_tool("list_recent_deployments", {"service": "checkout"})
            assert hidden.value.code == types.INVALID_PARAMS
            # A secret in the arguments (here the client's own token) never reaches the audit log.
            assert (await client.call_tool("get_flower_inventory", {"city": token})).is_error

    anyio.run(check)
    audit_text = team_mcp_server.audit.read_text(encoding="utf-8")
    mine = [e for e in team_mcp_server.audit_entries() if e["client"] == "oncall-bot"]
    # The hidden tool it tried is audited too, marked as unknown to it (nothing ran).
    assert [(e["tool"], e["arguments"], e["is_error"], e.get("unknown_tool")) for e in mine] == [
        ("list_recent_deployments", {"service": "checkout"}, True, True), ("get_flower_inventory", {"city": "***"}, True, None)]
    assert all(secret not in audit_text for secret in TEAM_TOKENS.values())
    assert all(secret not in "\n".join(team_mcp_server.server.stderr) for secret in TEAM_TOKENS.values())


def test_http_admits_a_browser_page_of_an_allowed_origin_with_cors(team_mcp_server: Any) -> None:
    inspector = "http://localhost:6274"  # the server runs with --allow-origin http://localhost:6274
    preflight = httpx.options(team_mcp_server.url, timeout=10, headers={
        "Origin": inspector, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version"})
    assert preflight.status_code == 204  # answered before the bearer check: a preflight carries no token
    assert preflight.headers["access-control-allow-origin"] == inspector
    allowed = {name.strip() for name in preflight.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "mcp-protocol-version", "mcp-session-id", "last-event-id"} <= allowed

    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "inspector", "version": "1"}}}
    headers = {"Origin": inspector, "Accept": "application/json, text/event-stream"}
    refused = httpx.post(team_mcp_server.url, json=initialize, timeout=10, headers=headers)
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == inspector
    token = {"Authorization": f"Bearer {TEAM_TOKENS['admin']}"}
    admitted = httpx.post(team_mcp_server.url, json=initialize, timeout=10, headers={**headers, **token})
    assert admitted.status_code == 200 and admitted.headers["mcp-session-id"]
    assert admitted.headers["access-control-allow-origin"] == inspector
    assert "Mcp-Session-Id" in admitted.headers["access-control-expose-headers"]
    httpx.delete(team_mcp_server.url, timeout=10, headers={**token, "mcp-session-id": admitted.headers["mcp-session-id"]})
    for other in ("http://localhost:6275", "https://localhost:6274"):  # any other origin is refused as before
        assert httpx.options(team_mcp_server.url, timeout=10, headers={"Origin": other}).status_code == 403


def test_allow_origin_must_be_an_origin_and_needs_http_and_recipes_a_folder() -> None:
    for origin in ("*", "localhost:6274", "https://inspector.example/path", "ftp://x"):
        with pytest.raises(UserError, match="is not an origin"):
            serve(ROOT / "tools.d", http="127.0.0.1:0", allow_origins=[origin])
    with pytest.raises(UserError, match="--allow-origin is for browser clients"):
        serve(ROOT / "tools.d", allow_origins=["http://localhost:6274"])
    with pytest.raises(UserError, match="recipes directory not found"):
        serve(ROOT / "tools.d", recipes=ROOT / "no-such-recipes")


def test_an_audit_log_that_cannot_be_opened_is_a_user_error_naming_it(tmp_path: Path) -> None:
    # A folder not made yet (/var/log/toolrun on a fresh machine), and a folder given as the file.
    for audit, reason in ((tmp_path / "not-made" / "audit.jsonl", "No such file or directory"),
                          (tmp_path, "Is a directory")):
        with pytest.raises(UserError, match="cannot open the audit log") as raised:
            serve(TOOLS_D, http="127.0.0.1:0", audit=audit)
        assert raised.value.problems[0].file == audit and reason in str(raised.value)


@pytest.mark.integration  # a load test: 10 clients, 200 calls
def test_http_answers_200_concurrent_calls_from_10_clients_each_with_its_own_result(team_mcp_server: Any) -> None:
    catalog = toolrun.load_catalog(TOOLS_D)
    cities = ["北京", "上海", "深圳"]
    expected = {city: toolrun.call(catalog, "get_flower_inventory", {"city": city}).result for city in cities}
    answers: list[tuple[str, str, bool]] = []

    async def check() -> None:
        async def one(client: Client, index: int) -> None:
            city = cities[index % 3]
            result = await client.call_tool("get_flower_inventory", {"city": city})
            answers.append((city, result.content[0].text, result.is_error))

        async def session(number: int) -> None:
            async with http_client(team_mcp_server.url, TEAM_TOKENS["admin"], mode="legacy") as client:
                async with anyio.create_task_group() as calls:
                    for index in range(20):
                        calls.start_soon(one, client, number * 20 + index)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as sessions:
                for number in range(10):
                    sessions.start_soon(session, number)

    anyio.run(check)
    assert len(answers) == 200
    assert all(text == expected[city] and not is_error for city, text, is_error in answers)


def test_http_off_loopback_without_auth_refuses_to_start() -> None:
    completed = subprocess.run(toolrun_mcp_argv("--tools-dir", str(TOOLS_D), "--http", "0.0.0.0:0"), cwd=ROOT,
                               env=server_env(), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert completed.returncode == 2
    assert "refusing to serve on 0.0.0.0 without --auth" in completed.stderr and "Traceback" not in completed.stderr


def test_an_auth_file_with_a_literal_token_is_refused(tmp_path: Path) -> None:
    auth = write(tmp_path, "clients.yaml", "clients:\n  - name: bot\n    token: hunter2-literal\n")
    completed = subprocess.run(toolrun_mcp_argv("--tools-dir", str(TOOLS_D), "--http", "127.0.0.1:0", "--auth", str(auth)),
                               cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL)
    assert completed.returncode == 2
    assert f"{auth}:3: client 'bot': a token must not be written in the file" in completed.stderr


def test_the_command_line_does_not_import_the_sdk() -> None:
    code = "import sys, toolrun, toolrun.cli; assert 'mcp' not in sys.modules and 'mcp_types' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=server_env(), check=True, timeout=30)
    version = ("import sys\nfrom toolrun.cli import main\ntry:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
               "assert 'mcp' not in sys.modules, 'toolrun --version imported the MCP SDK'")
    completed = subprocess.run([sys.executable, "-c", version], cwd=ROOT, env=server_env(),
                               capture_output=True, text=True, timeout=30)
    assert completed.returncode == 0, completed.stderr
    assert "toolrun" in completed.stdout


# ---------------------------------------------------------------- lines the SDK cannot read


@pytest.mark.parametrize("served_by", ["lean", "sdk"])
def test_a_request_too_deep_or_not_json_gets_an_error_reply_and_the_session_goes_on(tmp_path: Path,
                                                                                     served_by: str) -> None:
    # Spoken raw over stdio, as a client with its own JSON-RPC code would: the SDK's parser gives up
    # near 200 levels, and a request it could not read used to get no reply at all. A first line that is
    # not an initialize request hands the client to the SDK's server, whose unreadable lines are answered too.
    tools = tmp_path / "tools.d"
    tools.mkdir()
    shutil.copy(TOOLS_D / "disk.yaml", tools / "disk.yaml")
    process = subprocess.Popen(toolrun_mcp_argv("--tools-dir", str(tools)), cwd=ROOT, env=server_env(),
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdin is not None and process.stdout is not None

    def exchange(line: str) -> dict[str, Any]:
        process.stdin.write(line + "\n")  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]
        readable, _, _ = select.select([process.stdout], [], [], 20)  # one reply per line: nothing is buffered
        assert readable, f"no reply to {line[:80]}"
        return json.loads(process.stdout.readline())  # type: ignore[union-attr]

    try:
        if served_by == "sdk":
            assert exchange("not JSON, first")["error"]["code"] == -32700
        hello = exchange(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}))
        assert hello["id"] == 1 and "result" in hello
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        for depth, request_id in ((300, 2), (5000, "deep-3")):
            nested = '{"a": ' * depth + '"x"' + "}" * depth
            line = ('{"jsonrpc": "2.0", "id": ' + json.dumps(request_id) + ', "method": "tools/call", "params": '
                    '{"name": "get_disk_usage", "arguments": {"path": "/", "extra": ' + nested + "}}}")
            reply = exchange(line)
            assert reply["id"] == request_id and reply["error"]["code"] == -32600, reply
            assert_valid("JSONRPCErrorResponse", reply)
        process.stdin.write("\n")  # a blank line and a notification too deep to read get no reply...
        process.stdin.write('{"jsonrpc": "2.0", "method": "notifications/x", "params": ' + '{"a": ' * 300 + "1"
                            + "}" * 300 + "}\n")
        garbage = exchange("this is not JSON")  # ...so the next reply is this line's
        assert garbage["id"] is None and garbage["error"]["code"] == -32700
        listed = exchange(json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}))
        assert [tool["name"] for tool in listed["result"]["tools"]] == ["get_disk_usage", "list_largest_directories"]
    finally:
        process.stdin.close()
        process.wait(timeout=30)
        process.stdout.close()
