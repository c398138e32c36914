"""``toolrun mcp --http --auth`` against clients that try to hurt the others.

One real server (a process on 127.0.0.1) with short deadlines and small session limits
serves a tools folder of this module's own; the attacks come from raw sockets, raw HTTP
and the official SDK client: filling the session table, using another client's session,
half-sent requests (slowloris), reading another client's load problems, and terminal
controls in what the audit log and the operator's lines print.
"""

from __future__ import annotations

import hashlib
import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.mcp_helpers import HttpServer, echo_tool, http_server

pytestmark = [pytest.mark.integration,  # hostile clients against a real gateway: deadlines, session limits, floods
              pytest.mark.xdist_group("mcp-hostile")]  # --dist loadgroup: its module's server starts once, on one worker
TOKENS = {"reader": "reader-0f3a9c51d2", "other": "other-77b1e04c9a", "admin": "admin-c2d8a6e3f5"}
HEADER_TIMEOUT = 1.5
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "hostile-test", "version": "1"}}}
# Controls a terminal obeys: CSI (C1), right-to-left override, line and paragraph separators, NEL, ESC, BEL.
CONTROLS = "\x9b\u202e\u2028\u2029\x85\x1b\x07"
BROKEN = f"broken{CONTROLS}.yaml"

SHELL_ECHO = '{shell: {argv: [echo, "{{ text }}"]}}'  # the text back as plain text, no file beside it


@pytest.fixture(scope="module")
def tools_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("hostile-tools")
    for name in ("get_echo", "secret_echo"):
        (folder / f"{name}.yaml").write_text(echo_tool(name, backend=SHELL_ECHO), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def server(tools_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """reader sees get_* and may hold 2 sessions; other and admin see every tool; audit on stderr."""
    folder = tmp_path_factory.mktemp("hostile-auth")
    auth = folder / "clients.yaml"
    digest = hashlib.sha256(TOKENS["admin"].encode()).hexdigest()
    auth.write_text('clients:\n'
                    '  - {name: reader, token: "${env:READER_TOKEN}", tools: ["get_*"], max_sessions: 2}\n'
                    '  - {name: other, token: "${env:OTHER_TOKEN}"}\n'
                    f'  - {{name: admin, token_sha256: {digest}}}\n', encoding="utf-8")
    env = {"READER_TOKEN": TOKENS["reader"], "OTHER_TOKEN": TOKENS["other"]}
    with http_server("--tools-dir", str(tools_dir), "--auth", str(auth), "--max-sessions", "8",
                     "--header-timeout", f"{HEADER_TIMEOUT}s", "--body-timeout", f"{HEADER_TIMEOUT}s",
                     "--max-connections", "40", env=env, startup_timeout=60) as started:
        yield started


def bearer(client: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[client]}"}


def open_session(url: str, client: str) -> httpx.Response:
    return httpx.post(url, json=INITIALIZE, headers={**ACCEPT, **bearer(client)}, timeout=15)


def session_headers(client: str, session_id: str) -> dict[str, str]:
    return {**ACCEPT, **bearer(client), "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}


def tools_list(url: str, client: str, session_id: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    return httpx.post(url, json=body, headers=session_headers(client, session_id), timeout=15)


def hold_event_stream(url: str, client: str, session_id: str) -> socket.socket:
    """A GET event stream kept open on a raw socket: the session has a request in flight (it is not idle)."""
    host, port = httpx.URL(url).host, httpx.URL(url).port
    sock = socket.create_connection((host, port), timeout=10)
    lines = ["GET /mcp HTTP/1.1", f"Host: {host}:{port}", "Accept: text/event-stream",
             *(f"{key}: {value}" for key, value in session_headers(client, session_id).items() if key != "Accept")]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    assert b" 200 " in sock.recv(4096).split(b"\r\n", 1)[0]
    return sock


def http_client(url: str, client: str, **options: Any) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=bearer(client), timeout=30)),
                  mode="legacy", **options)


def delete(url: str, client: str, session_id: str) -> httpx.Response:
    return httpx.delete(url, headers=session_headers(client, session_id), timeout=15)


# ---------------------------------------------------------------- sessions: per client, overall, bound to their owner


def test_a_client_at_its_session_limit_gets_429_saying_so_and_the_others_keep_opening(server: HttpServer) -> None:
    opened = [open_session(server.url, "reader") for _ in range(2)]
    assert [response.status_code for response in opened] == [200, 200]
    ids = [response.headers["mcp-session-id"] for response in opened]
    streams = [hold_event_stream(server.url, "reader", session_id) for session_id in ids]
    try:
        refused = open_session(server.url, "reader")
        assert refused.status_code == 429
        error = refused.json()
        assert error["jsonrpc"] == "2.0" and error["error"]["code"] == -32000
        assert "client 'reader' has 2 open, its limit" in error["error"]["message"]

        async def others_are_served() -> None:  # another client, with the SDK's own client, is not locked out
            async with http_client(server.url, "other") as other:
                assert not (await other.call_tool("secret_echo", {"text": "still here"})).is_error

        anyio.run(others_are_served)
    finally:
        streams[0].close()  # its event stream gone, the oldest session is idle
    replacement = _eventually(lambda: open_session(server.url, "reader"), lambda response: response.status_code == 200)
    assert tools_list(server.url, "reader", ids[0]).status_code == 404  # the idle one made room
    assert tools_list(server.url, "reader", ids[1]).status_code == 200  # the busy one was kept
    streams[1].close()
    for session_id in (ids[1], replacement.headers["mcp-session-id"]):
        assert delete(server.url, "reader", session_id).status_code == 200


def test_a_crashed_client_that_restarts_is_not_locked_out_by_its_own_old_sessions(server: HttpServer) -> None:
    async def one_run() -> None:  # a process that connects, works, and dies without closing its session
        async with http_client(server.url, "reader") as reader:
            assert not (await reader.call_tool("get_echo", {"text": "hi"})).is_error

    for _ in range(4):  # twice its limit: the old sessions are idle and make room
        anyio.run(one_run)


def test_the_overall_limit_holds_and_names_itself(server: HttpServer) -> None:
    # 8 in all; other and admin may hold 4 each (half the overall), so together they fill it.
    opened = {client: [open_session(server.url, client) for _ in range(4)] for client in ("other", "admin")}
    ids = {client: [r.headers["mcp-session-id"] for r in responses] for client, responses in opened.items()}
    streams = [hold_event_stream(server.url, client, session_id) for client in ids for session_id in ids[client]]
    try:
        refused = open_session(server.url, "reader")
        assert refused.status_code == 429
        assert "the server has 8 open, its limit of 8" in refused.json()["error"]["message"]
    finally:
        for stream in streams:
            stream.close()
        for client in ids:
            for session_id in ids[client]:
                _eventually(lambda c=client, s=session_id: delete(server.url, c, s), lambda r: r.status_code in (200, 404))


def test_a_session_answers_only_the_client_that_opened_it(server: HttpServer) -> None:
    session_id = open_session(server.url, "admin").headers["mcp-session-id"]
    unknown = tools_list(server.url, "reader", uuid.uuid4().hex)
    for attempt in (tools_list(server.url, "reader", session_id), tools_list(server.url, "other", session_id),
                    delete(server.url, "other", session_id)):
        # The same answer as for a session that does not exist: its existence is not confirmed.
        assert (attempt.status_code, attempt.content) == (unknown.status_code, unknown.content) == (404, unknown.content)
    assert tools_list(server.url, "admin", session_id).status_code == 200  # the owner's session lives on
    assert delete(server.url, "admin", session_id).status_code == 200


# ---------------------------------------------------------------- slowloris


def _slow_request(url: str, start: bytes) -> socket.socket:
    host, port = httpx.URL(url).host, httpx.URL(url).port
    sock = socket.create_connection((host, port), timeout=10)
    sock.sendall(start)
    return sock


_RECEIVED: dict[socket.socket, bytes] = {}


def _closed(sock: socket.socket) -> bytes | None:
    """Everything the server sent on ``sock`` once it closed it; None while it is still open."""
    sock.setblocking(False)
    try:
        while chunk := sock.recv(4096):
            _RECEIVED[sock] = _RECEIVED.get(sock, b"") + chunk
    except BlockingIOError:
        return None
    except ConnectionResetError:
        pass
    return _RECEIVED.pop(sock, b"")


def test_half_sent_requests_are_closed_at_the_deadline_and_clients_keep_working(server: HttpServer) -> None:
    # More half-sent requests than the server keeps connections (40): the oldest make room for new ones.
    dripping = [_slow_request(server.url, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ") for _ in range(50)]
    late_body = _slow_request(server.url, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              + f"Authorization: Bearer {TOKENS['admin']}\r\n".encode()
                              + b"Content-Length: 500\r\n\r\n{\"jsonrpc\":")  # a known client, a body that stops
    started = time.monotonic()

    async def work_throughout() -> None:
        async with http_client(server.url, "admin") as admin:
            while time.monotonic() - started < HEADER_TIMEOUT * 2:
                for sock in dripping:  # one more byte each: a slow client is not a silent one
                    try:
                        sock.send(b"a")
                    except OSError:
                        pass
                assert not (await admin.call_tool("get_echo", {"text": "served"})).is_error
                await anyio.sleep(0.2)

    try:
        anyio.run(work_throughout)
        endings = _eventually(lambda: [_closed(sock) for sock in [*dripping, late_body]],
                              lambda found: None not in found)
        assert endings[:-1] == [b""] * len(dripping)  # headers never came: closed without an answer
        assert endings[-1] is not None and endings[-1].startswith(b"HTTP/1.1 408 ")  # a body stopped: 408
    finally:
        for sock in [*dripping, late_body]:
            sock.close()


# ---------------------------------------------------------------- load problems: each client sees its own tools'


def test_a_client_hears_only_the_load_problems_of_tools_it_can_see(server: HttpServer, tools_dir: Path) -> None:
    heard: dict[str, list[str]] = {"reader": [], "admin": []}

    def listener(client: str) -> Any:
        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            heard[client].append(str(params.data))
        return on_log

    async def check() -> None:
        async with http_client(server.url, "reader", logging_callback=listener("reader")) as reader, \
                http_client(server.url, "admin", logging_callback=listener("admin")) as admin:
            for client in (reader, admin):
                await client.list_tools()  # a 2025-11-25 session listening for changes
            (tools_dir / "secret_echo.yaml").write_text(echo_tool("secret_echo", backend=SHELL_ECHO) + "secret_key: 1\n",
                                                        encoding="utf-8")
            (tools_dir / BROKEN).write_text("name: [unclosed\n", encoding="utf-8")  # its name printed on stderr
            with anyio.fail_after(20):
                while len(heard["admin"]) < 2:
                    await reader.list_tools()
                    await anyio.sleep(0.1)
            assert any("secret_echo.yaml" in line and "secret_key" in line for line in heard["admin"])
            assert any("broken" in line for line in heard["admin"])
            assert heard["reader"] == []  # neither the hidden tool's problem nor a whole file's

            (tools_dir / "get_echo.yaml").write_text(echo_tool("get_echo", backend=SHELL_ECHO) + "get_key: 1\n",
                                                     encoding="utf-8")
            with anyio.fail_after(20):
                while not heard["reader"]:
                    await reader.list_tools()
                    await anyio.sleep(0.1)
            assert all("get_echo.yaml" in line for line in heard["reader"])  # its own tool's problem it hears

    try:
        anyio.run(check)
    finally:
        for name in ("get_echo", "secret_echo"):
            (tools_dir / f"{name}.yaml").write_text(echo_tool(name, backend=SHELL_ECHO), encoding="utf-8")
        (tools_dir / BROKEN).unlink(missing_ok=True)


# ---------------------------------------------------------------- what is printed: audit and the operator's lines


def test_the_audit_log_and_load_problems_on_stderr_escape_terminal_controls(server: HttpServer,
                                                                            tools_dir: Path) -> None:
    name, text = f"get_{CONTROLS}x", f"a{CONTROLS}b"
    odd_file = tools_dir / f"odd{CONTROLS}.yaml"  # a file name is printed in the operator's load problems

    async def check() -> None:
        async with http_client(server.url, "admin") as admin:
            await admin.call_tool("get_echo", {"text": text})
            with pytest.raises(MCPError):  # unknown to it: the protocol's error, and an audit line
                await admin.call_tool(name, {"text": text})
            odd_file.write_text("name: [unclosed\n", encoding="utf-8")
            await admin.list_tools()  # reloads the folder: the problem goes to stderr

    try:
        anyio.run(check)
        lines = _eventually(lambda: [line for line in server.stderr if '"client": "admin"' in line and "a\\u009b" in line],
                            lambda found: len(found) >= 2)
        _eventually(lambda: "\n".join(server.stderr), lambda printed: "odd" in printed)
    finally:
        odd_file.unlink()
    printed = "\n".join(server.stderr)
    assert not any(char in printed for char in CONTROLS)  # the audit lines, the load problems
    assert "odd\\x9b\\u202e\\u2028\\u2029\\x85\\x1b\\x07.yaml" in printed
    entries = [json.loads(line) for line in lines]
    assert {entry["tool"] for entry in entries} >= {"get_echo", name}
    assert all(entry["arguments"] == {"text": text} for entry in entries)


def _eventually(attempt: Any, done: Any, seconds: float = 20) -> Any:
    """``attempt()`` until ``done(result)`` (the server acts in its own time); the last result."""
    deadline = time.monotonic() + seconds
    while True:
        result = attempt()
        if done(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.1)
