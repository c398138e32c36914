"""``toolrun mcp`` driven by the official MCP client, over stdio and streamable HTTP, in both protocol eras.

Every listed Tool and every CallToolResult is checked against the protocol's JSON Schema
(2025-11-25 and 2026-07-28, tests/fixtures/specs/). Servers are real processes; each stops
at the end of its test (stdio: the client closes stdin; HTTP: terminated by the fixture).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

import toolrun
from tests.mcp_helpers import ROOT, assert_valid, http_server, server_env, toolrun_mcp_argv, wire

TOOLS_D = ROOT / "tools.d"
EXAMPLE_CALLS: dict[str, dict[str, Any]] = {
    "get_flower_inventory": {"city": "北京"},
    "get_disk_usage": {"path": "/"},
    "list_largest_directories": {"path": str(ROOT / "tools.d"), "count": 3},
    "get_service_status": {"service": "checkout"},  # OPS_API_URL is unset: an error result, the same both ways
    "list_recent_deployments": {"service": "checkout"},
}
MODES = ["legacy", "auto"]  # the initialize handshake of 2025-11-25; "auto" discovers 2026-07-28 and its per-request envelope


def stdio(tools_dir: Path, *args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    argv = toolrun_mcp_argv("--tools-dir", str(tools_dir), *args)
    return StdioServerParameters(command=argv[0], args=argv[1:], env=server_env(env), cwd=str(ROOT))


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


ECHO_TOOL = """
    name: {name}
    description: >-
      Echoes its text argument back as a JSON object with the text and its length. Use it to check
      that the server answers; do not use it for anything else, it changes nothing anywhere.
    parameters:
      type: object
      properties:
        text: {{type: string, description: The text to echo back.}}
      required: [text]
      additionalProperties: false
    annotations: {{read_only: true, title: Echo}}
    backend:
      python: echo.py:echo
"""


@pytest.fixture
def echo_dir(tmp_path: Path) -> Path:
    write(tmp_path, "echo.py", """
        import os, time
        def echo(text):
            return {"text": text, "length": len(text)}
        def slow(seconds, pid_file):
            with open(pid_file, "w") as f:
                f.write(str(os.getpid()))
            time.sleep(seconds)
            return "done"
    """)
    write(tmp_path, "echo.yaml", ECHO_TOOL.format(name="echo"))
    return tmp_path


def run(coroutine_function: Any, *args: Any) -> Any:
    return anyio.run(coroutine_function, *args)


# ---------------------------------------------------------------- stdio


@pytest.mark.parametrize("mode", MODES)
def test_stdio_lists_the_catalog_and_calls_each_example_tool_like_toolrun_call(mode: str) -> None:
    catalog = toolrun.load_catalog(TOOLS_D)

    async def session() -> None:
        async with Client(stdio(TOOLS_D), mode=mode) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            assert client.server_capabilities.tools is not None
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
            for name, arguments in EXAMPLE_CALLS.items():
                result = await client.call_tool(name, arguments)
                assert_valid("CallToolResult", wire(result))
                expected = await toolrun.acall(catalog, name, arguments)
                assert result.is_error is expected.is_error, name
                assert [block.text for block in result.content] == [expected.result], name

    run(session)


@pytest.mark.parametrize("mode", MODES)
def test_bad_arguments_and_failures_are_error_results_and_unknown_tools_a_protocol_error(mode: str) -> None:
    async def session() -> None:
        async with Client(stdio(TOOLS_D), mode=mode) as client:
            bad = await client.call_tool("get_flower_inventory", {"city": "Paris"})
            assert_valid("CallToolResult", wire(bad))
            assert bad.is_error is True
            assert bad.content[0].text == ('invalid arguments for get_flower_inventory: at $.city: '
                                           'expected one of ["北京", "上海", "深圳"], got "Paris"')
            not_an_object = await client.call_tool("get_disk_usage", {"path": 7})
            assert not_an_object.is_error and "at $.path: expected string, got 7" in not_an_object.content[0].text
            failing = await client.call_tool("get_service_status", {"service": "checkout"})
            assert failing.is_error and "OPS_API_URL" in failing.content[0].text
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("get_flower_inventroy", {"city": "北京"})
            assert unknown.value.code == types.INVALID_PARAMS
            assert "get_flower_inventroy" in str(unknown.value)
            still_serving = await client.call_tool("get_flower_inventory", {"city": "上海"})
            assert still_serving.is_error is False

    run(session)


@pytest.mark.parametrize("mode", MODES)
def test_a_json_object_result_is_also_structured_content(mode: str, echo_dir: Path) -> None:
    async def session() -> None:
        async with Client(stdio(echo_dir), mode=mode) as client:
            result = await client.call_tool("echo", {"text": "北京"})
            assert_valid("CallToolResult", wire(result))
            assert result.structured_content == {"text": "北京", "length": 2}
            assert json.loads(result.content[0].text) == {"text": "北京", "length": 2}

    run(session)


def test_tools_selects_by_glob() -> None:
    async def session() -> None:
        async with Client(stdio(TOOLS_D, "--tools", "get_*", "--tools", "list_recent_*"), mode="legacy") as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names == ["get_disk_usage", "get_flower_inventory", "get_service_status", "list_recent_deployments"]
            with pytest.raises(MCPError):
                await client.call_tool("restart_service", {})

    run(session)


# ---------------------------------------------------------------- approval

RESTART = {"service": "checkout", "environment": "staging", "reason": "stuck after the config push"}


def answering(approve: bool | None, asked: list[str]) -> Any:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        if approve is None:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"approve": approve})

    return elicit


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_that_needs_approval_asks_the_clients_user(mode: str) -> None:
    async def session() -> None:
        asked: list[str] = []
        async with Client(stdio(TOOLS_D), mode=mode, elicitation_callback=answering(False, asked)) as client:
            denied = await client.call_tool("restart_service", RESTART)
            assert denied.is_error and denied.content[0].text == "the user denied this call"
            assert len(asked) == 1 and "restart_service" in asked[0] and '"environment": "staging"' in asked[0]
            invalid = await client.call_tool("restart_service", {"service": "checkout"})
            assert invalid.is_error and "missing required property" in invalid.content[0].text
            assert len(asked) == 1, "a call with invalid arguments must not ask anyone"
        async with Client(stdio(TOOLS_D), mode=mode, elicitation_callback=answering(True, asked)) as client:
            approved = await client.call_tool("restart_service", RESTART)
            assert_valid("CallToolResult", wire(approved))
            # It ran: the ops API is not configured here, which the backend reports.
            assert approved.is_error and "OPS_API_URL" in approved.content[0].text
            assert len(asked) == 2

    run(session)


@pytest.mark.parametrize("mode", MODES)
def test_without_elicitation_approval_is_refused_with_the_way_out_and_yes_allows_it(mode: str) -> None:
    async def session() -> None:
        async with Client(stdio(TOOLS_D), mode=mode) as client:
            refused = await client.call_tool("restart_service", RESTART)
            assert refused.is_error and "--yes" in refused.content[0].text
            assert "elicitation" in refused.content[0].text
        async with Client(stdio(TOOLS_D, "--yes"), mode=mode) as client:
            allowed = await client.call_tool("restart_service", RESTART)
            assert allowed.is_error and "OPS_API_URL" in allowed.content[0].text

    run(session)


# ---------------------------------------------------------------- progress and cancellation


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has exited; only its parent has not collected it yet.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[1].startswith("Z"))


def test_a_long_call_reports_progress_and_cancelling_it_kills_its_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "sleeper.pid"
    write(tmp_path, "sleeper.yaml", f"""
        name: sleep_long
        description: >-
          Sleeps for half a minute in a shell process and then says so. Use it only to test
          cancellation of long calls; do not use it for anything else, it does nothing useful.
        parameters: {{type: object, properties: {{}}, additionalProperties: false}}
        timeout: 60s
        annotations: {{read_only: true}}
        backend:
          shell:
            shell: true
            command: echo $$ > {pid_file}; exec sleep 30
    """)

    async def session() -> None:
        progress: list[tuple[float, str | None]] = []
        first_progress = anyio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message))
            first_progress.set()

        async with Client(stdio(tmp_path), mode="legacy") as client:
            async with anyio.create_task_group() as tasks:
                async def call() -> None:
                    await client.call_tool("sleep_long", {}, progress_callback=on_progress)

                tasks.start_soon(call)
                with anyio.fail_after(10):
                    await first_progress.wait()
                tasks.cancel_scope.cancel()  # the client sends notifications/cancelled
            assert progress and "sleep_long is running" in (progress[0][1] or "")
            pid = int(pid_file.read_text())
            with anyio.fail_after(10):
                while _alive(pid):
                    await anyio.sleep(0.05)
            assert (await client.call_tool("sleep_long", {"unexpected": 1})).is_error  # the session still answers

    run(session)


# ---------------------------------------------------------------- reloading


def test_a_file_dropped_in_while_serving_is_listed_and_the_client_notified(echo_dir: Path) -> None:
    async def session() -> None:
        changed = anyio.Event()
        logged: list[str] = []

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                changed.set()

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logged.append(str(params.data))

        async with Client(stdio(echo_dir), mode="legacy", message_handler=on_message, logging_callback=on_log) as client:
            assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
            write(echo_dir, "echo2.yaml", ECHO_TOOL.format(name="echo_again"))
            with anyio.fail_after(10):
                await changed.wait()
            assert [t.name for t in (await client.list_tools()).tools] == ["echo", "echo_again"]
            assert not (await client.call_tool("echo_again", {"text": "hi"})).is_error

            changed = anyio.Event()
            write(echo_dir, "echo2.yaml", "name: echo_again\ndescriptoin: typo\n")
            with anyio.fail_after(10):
                await changed.wait()
            with anyio.fail_after(10):
                while not any("descriptoin" in line for line in logged):
                    await anyio.sleep(0.02)
            assert all("echo2.yaml" in line for line in logged)
            assert [t.name for t in (await client.list_tools()).tools] == ["echo"]
            assert not (await client.call_tool("echo", {"text": "still here"})).is_error

    run(session)


def test_a_2026_client_listening_for_changes_hears_about_a_new_file(echo_dir: Path) -> None:
    async def session() -> None:
        async with Client(stdio(echo_dir), mode="auto") as client:
            async with client.listen(tools_list_changed=True) as subscription:
                write(echo_dir, "echo2.yaml", ECHO_TOOL.format(name="echo_again"))
                with anyio.fail_after(10):
                    async for _event in subscription:
                        break
            assert [t.name for t in (await client.list_tools()).tools] == ["echo", "echo_again"]

    run(session)


# ---------------------------------------------------------------- streamable HTTP


def http_client(url: str, token: str | None = None, **options: Any) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30)), **options)


@pytest.mark.parametrize("mode", MODES)
def test_http_serves_the_same_catalog_and_results(mode: str, tmp_path: Path) -> None:
    catalog = toolrun.load_catalog(TOOLS_D)
    audit = tmp_path / "audit.jsonl"
    with http_server("--tools-dir", str(TOOLS_D), "--audit", str(audit)) as server:
        async def session() -> None:
            async with http_client(server.url, mode=mode) as client:
                listed = await client.list_tools()
                assert [t.name for t in listed.tools] == [t.name for t in catalog]
                for tool in listed.tools:
                    assert_valid("Tool", wire(tool))
                result = await client.call_tool("get_flower_inventory", {"city": "深圳"})
                assert_valid("CallToolResult", wire(result))
                expected = await toolrun.acall(catalog, "get_flower_inventory", {"city": "深圳"})
                assert (result.content[0].text, result.is_error) == (expected.result, False)
                bad = await client.call_tool("get_flower_inventory", {})
                assert bad.is_error and "missing required property 'city'" in bad.content[0].text

        run(session)
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    assert [(entry["tool"], entry["is_error"]) for entry in lines] == [
        ("get_flower_inventory", False), ("get_flower_inventory", True)]
    assert set(lines[0]) == {"time", "client", "tool", "arguments", "is_error", "duration_ms"}


def test_http_refuses_a_foreign_browser_origin() -> None:
    with http_server("--tools-dir", str(TOOLS_D)) as server:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Origin": "https://evil.example", "Accept": "application/json, text/event-stream"}
        response = httpx.post(server.url, json=body, headers=headers, timeout=10)
        assert response.status_code == 403


def test_http_off_loopback_without_auth_refuses_to_start() -> None:
    completed = subprocess.run(toolrun_mcp_argv("--tools-dir", str(TOOLS_D), "--http", "0.0.0.0:0"), cwd=ROOT,
                               env=server_env(), capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert completed.returncode == 2
    assert "without --auth" in completed.stderr and "Traceback" not in completed.stderr


ONCALL_TOKEN = "oncall-7d1e0b5a9c3f"
ADMIN_TOKEN = "admin-52aa90e1c7d4"


def test_http_with_auth_admits_known_tokens_and_scopes_each_client(tmp_path: Path) -> None:
    auth = write(tmp_path, "clients.yaml", f"""
        clients:
          - name: oncall-bot
            token: "${{env:ONCALL_TOKEN}}"
            tools: ["get_*"]
          - name: admin
            token_sha256: {hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()}
    """)
    audit = tmp_path / "audit.jsonl"
    with http_server("--tools-dir", str(TOOLS_D), "--auth", str(auth), "--audit", str(audit),
                     env={"ONCALL_TOKEN": ONCALL_TOKEN}) as server:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        for headers in ({}, {"Authorization": "Bearer not-a-known-token"}, {"Authorization": ONCALL_TOKEN}):
            response = httpx.post(server.url, json=body, timeout=10,
                                  headers={"Accept": "application/json, text/event-stream", **headers})
            assert response.status_code == 401, headers

        async def session() -> None:
            async with http_client(server.url, ONCALL_TOKEN, mode="legacy") as client:
                names = [t.name for t in (await client.list_tools()).tools]
                assert names == ["get_disk_usage", "get_flower_inventory", "get_service_status"]
                with pytest.raises(MCPError) as hidden:
                    await client.call_tool("list_recent_deployments", {"service": "checkout"})
                assert hidden.value.code == types.INVALID_PARAMS
                # A secret in the arguments (here the client's own token) never reaches the audit log.
                assert (await client.call_tool("get_flower_inventory", {"city": ONCALL_TOKEN})).is_error
            async with http_client(server.url, ADMIN_TOKEN, mode="auto") as client:
                assert len((await client.list_tools()).tools) == 6
                assert not (await client.call_tool("get_flower_inventory", {"city": "北京"})).is_error

        run(session)
    audit_text = audit.read_text(encoding="utf-8")
    entries = [json.loads(line) for line in audit_text.splitlines()]
    assert [(e["client"], e["tool"], e["is_error"]) for e in entries] == [
        ("oncall-bot", "get_flower_inventory", True), ("admin", "get_flower_inventory", False)]
    assert entries[0]["arguments"] == {"city": "***"}
    assert ONCALL_TOKEN not in audit_text and ADMIN_TOKEN not in audit_text
    assert ONCALL_TOKEN not in "\n".join(server.stderr)


def test_an_auth_file_with_a_literal_token_is_refused(tmp_path: Path) -> None:
    auth = write(tmp_path, "clients.yaml", "clients:\n  - name: bot\n    token: hunter2-literal\n")
    completed = subprocess.run(toolrun_mcp_argv("--tools-dir", str(TOOLS_D), "--http", "127.0.0.1:0", "--auth", str(auth)),
                               cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL)
    assert completed.returncode == 2
    assert f"{auth}:3: client 'bot': a token must not be written in the file" in completed.stderr


def test_the_command_line_does_not_import_the_sdk() -> None:
    code = "import sys, toolrun.cli; assert 'mcp' not in sys.modules and 'mcp_types' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=server_env(), check=True, timeout=30)
    started = time.perf_counter()
    version = subprocess.run([sys.executable, "-m", "toolrun.cli", "--version"], cwd=ROOT, env=server_env(),
                             capture_output=True, text=True, check=True, timeout=30)
    assert "toolrun" in version.stdout and time.perf_counter() - started < 10
