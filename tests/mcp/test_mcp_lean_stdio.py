"""``toolrun mcp`` over stdio without the SDK: raw JSON-RPC lines against a real server process.

What the SDK client cannot easily show: a cursor, an unknown method, a notification that gets
no reply, the approval question as it travels and its answers, a cancelled call (no reply, its
process killed), and that serving a call never imports the SDK. One server serves the module's
raw exchanges. That a 2026-07-28 client is still served (handed to the SDK) is test_mcp_server.py's
"auto" sessions.
"""

from __future__ import annotations

import contextlib
import json
import select
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_helpers import ECHO_PY, ROOT, SLEEPER_TOOL, assert_valid, echo_tool, server_env, toolrun_mcp_argv
from toolrun.mcp.stdio_wire import MAX_LINE_BYTES

pytestmark = pytest.mark.xdist_group("mcp-servers")


def tools_dir(folder: Path) -> Path:
    (folder / "echo.py").write_text(ECHO_PY, encoding="utf-8")
    (folder / "echo.yaml").write_text(echo_tool("echo"), encoding="utf-8")
    (folder / "guarded.yaml").write_text(echo_tool("guarded_echo", extra="confirm: true"), encoding="utf-8")
    (folder / "sleeper.yaml").write_text(textwrap.dedent(SLEEPER_TOOL.format(pid_file=folder / "sleeper.pid")),
                                         encoding="utf-8")
    return folder


class RawClient:
    """A ``toolrun mcp`` process spoken to line by line."""

    def __init__(self, *argv: str) -> None:
        self.process = subprocess.Popen(list(argv), cwd=ROOT, env=server_env(), stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def send(self, message: dict[str, Any] | str) -> None:
        line = message if isinstance(message, str) else json.dumps(message)
        assert self.process.stdin is not None
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()

    def receive(self, timeout: float = 30) -> dict[str, Any]:
        assert self.process.stdout is not None
        readable, _, _ = select.select([self.process.stdout], [], [], timeout)
        assert readable, "no message from the server"
        return json.loads(self.process.stdout.readline())

    def request(self, request_id: int | str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params else {})})
        return self.receive()

    def initialize(self, capabilities: dict[str, Any] | None = None, version: str = "2025-11-25") -> dict[str, Any]:
        reply = self.request(0, "initialize", {"protocolVersion": version, "capabilities": capabilities or {},
                                               "clientInfo": {"name": "raw", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def close(self) -> str:
        """Close stdin, wait for the exit; what the server wrote to stderr."""
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        try:
            self.process.wait(30)
        finally:
            if self.process.poll() is None:
                self.process.kill()
        stderr = self.process.stderr.read().decode()
        for stream in (self.process.stdout, self.process.stderr):
            assert stream is not None
            stream.close()
        return stderr


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tools_dir(tmp_path_factory.mktemp("lean"))


@pytest.fixture(scope="module")
def raw(folder: Path) -> Iterator[RawClient]:
    client = RawClient(*toolrun_mcp_argv("--tools-dir", str(folder)))
    hello = client.initialize({"elicitation": {}})
    assert hello["result"]["serverInfo"]["name"] == "toolrun"
    yield client
    client.close()


@pytest.mark.parametrize("closed", ["<&-", ">&-"])
def test_a_server_started_with_stdin_or_stdout_closed_says_so_in_one_line(folder: Path, closed: str) -> None:
    argv = " ".join(toolrun_mcp_argv("--tools-dir", str(folder)))
    done = subprocess.run(["bash", "-c", f"exec {argv} {closed}"], cwd=ROOT, env=server_env(), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: stdin or stdout is closed") and "--http" in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1


def test_serving_a_call_over_stdio_never_imports_the_sdk(folder: Path) -> None:
    client = RawClient(sys.executable, "-X", "importtime", *toolrun_mcp_argv("--tools-dir", str(folder))[1:])
    hello = client.initialize(version="2024-11-05")
    assert hello["result"]["protocolVersion"] == "2024-11-05"
    assert [tool["name"] for tool in client.request(1, "tools/list")["result"]["tools"]] == \
        ["echo", "guarded_echo", "sleep_long"]
    called = client.request(2, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert called["result"]["structuredContent"] == {"text": "hi", "length": 2}
    stderr = client.close()
    imported = {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}
    assert "toolrun.mcp.lean_stdio" in imported
    sdk = sorted(name for name in imported if name.split(".")[0] in ("mcp", "mcp_types", "pydantic"))
    assert not sdk, f"the lean stdio server imported {sdk[:5]}"


def test_an_unknown_version_gets_the_latest_handshake_one_and_the_capabilities_of_today(folder: Path) -> None:
    client = RawClient(*toolrun_mcp_argv("--tools-dir", str(folder), "--recipes", str(folder)))
    try:
        result = client.initialize(version="2030-01-01")["result"]
        assert result["protocolVersion"] == "2025-11-25"
        assert result["capabilities"] == {"logging": {}, "tools": {"listChanged": True},
                                          "prompts": {"listChanged": False}, "completions": {}}
        assert_valid("InitializeResult", result, ("2025-11-25",))
    finally:
        client.close()


def test_a_cursor_is_refused_and_an_unknown_method_is_not_found(raw: RawClient) -> None:
    cursor = raw.request("c1", "tools/list", {"cursor": "page-2"})
    assert cursor["error"] == {"code": -32602, "message": "Invalid cursor: this server lists everything on one page"}
    unknown = raw.request("c2", "resources/list")
    assert unknown["error"] == {"code": -32601, "message": "Method not found", "data": "resources/list"}
    assert raw.request("c3", "prompts/list")["error"]["code"] == -32601  # no --recipes: no prompts
    assert_valid("JSONRPCErrorResponse", unknown, ("2025-11-25",))


def test_notifications_and_unreadable_messages_get_no_reply(raw: RawClient) -> None:
    raw.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})
    raw.send({"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": "not an object"})  # the SDK drops it too
    raw.send({"jsonrpc": "2.0", "id": 99, "result": {}})  # an answer to a question never asked
    raw.send("")
    assert raw.request("n1", "ping") == {"jsonrpc": "2.0", "id": "n1", "result": {}}  # the next reply is the ping's


def test_a_line_over_the_limit_gets_one_parse_error_and_the_next_message_is_read_whole(raw: RawClient) -> None:
    padding = "x" * (MAX_LINE_BYTES + 2 ** 21)  # the limit is crossed megabytes before the newline arrives
    raw.send({"jsonrpc": "2.0", "id": "big", "method": "ping", "params": {"padding": padding}})
    assert raw.receive()["error"] == {"code": -32700, "message": "Parse error: the line is not JSON"}
    # its tail was dropped with it, not read as a line of its own (a second parse error)
    assert raw.request("after-big", "ping") == {"jsonrpc": "2.0", "id": "after-big", "result": {}}


def test_malformed_params_and_unknown_tools_are_protocol_errors(raw: RawClient) -> None:
    assert raw.request("m1", "tools/call", {"name": "echo", "arguments": [1]})["error"]["code"] == -32602
    assert raw.request("m2", "logging/setLevel", {"level": "loud"})["error"]["code"] == -32602
    unknown = raw.request("m3", "tools/call", {"name": "nope", "arguments": {}})
    assert unknown["error"] == {"code": -32602, "message": "Unknown tool: nope"}
    modern = raw.request("m4", "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}})
    assert modern["error"]["code"] == -32600


@pytest.mark.parametrize(("answer", "expected"), [
    ({"action": "accept", "content": {"approve": True}}, {"text": "yes", "length": 3}),
    ({"action": "accept", "content": {"approve": False}}, None),
    ({"action": "decline"}, None),
])
@pytest.mark.parametrize("id_as_text", [False, True])  # a client answering question 3 as "3": the same question
def test_approval_is_asked_by_elicitation_and_the_answer_decides(raw: RawClient, answer: dict[str, Any],
                                                                 expected: dict[str, Any] | None, id_as_text: bool) -> None:
    raw.send({"jsonrpc": "2.0", "id": "a1", "method": "tools/call",
              "params": {"name": "guarded_echo", "arguments": {"text": "yes"}}})
    question = raw.receive()
    assert question["method"] == "elicitation/create" and "guarded_echo" in question["params"]["message"]
    assert_valid("ElicitRequest", question, ("2025-11-25",))
    raw.send({"jsonrpc": "2.0", "id": str(question["id"]) if id_as_text else question["id"], "result": answer})
    result = raw.receive()["result"]
    if expected is None:
        assert result["isError"] and result["content"][0]["text"] == "the user denied this call"
    else:
        assert not result["isError"] and result["structuredContent"] == expected


def test_a_call_cancelled_while_its_approval_question_is_up_withdraws_the_question(raw: RawClient) -> None:
    raw.send({"jsonrpc": "2.0", "id": "w1", "method": "tools/call",
              "params": {"name": "guarded_echo", "arguments": {"text": "no"}}})
    question = raw.receive()
    assert question["method"] == "elicitation/create"
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "w1"}})
    withdrawn = raw.receive()
    assert withdrawn["method"] == "notifications/cancelled" and withdrawn["params"]["requestId"] == question["id"]
    assert_valid("CancelledNotification", withdrawn, ("2025-11-25",))
    assert raw.request("w2", "ping")["id"] == "w2"  # and no reply to the cancelled call came before it


def _alive(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return not stat.read_text().split(") ", 1)[1].startswith("Z")
    except (FileNotFoundError, ProcessLookupError):
        return False


def test_a_cancelled_call_gets_no_reply_and_its_process_is_killed(raw: RawClient, folder: Path) -> None:
    pid_file = folder / "sleeper.pid"
    pid_file.unlink(missing_ok=True)
    raw.send({"jsonrpc": "2.0", "id": "s1", "method": "tools/call",
              "params": {"name": "sleep_long", "arguments": {}, "_meta": {"progressToken": "p1"}}})
    progress = raw.receive()
    assert progress["method"] == "notifications/progress" and progress["params"]["progressToken"] == "p1"
    assert "sleep_long is running" in progress["params"]["message"]
    pid = int(pid_file.read_text())
    raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s1"}})
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    assert raw.request("s2", "ping")["id"] == "s2"  # and nothing for s1 came before it


def test_a_server_reading_the_null_device_ends_at_once_without_a_traceback(folder: Path) -> None:
    # `toolrun mcp < /dev/null`: a character device epoll refuses to watch; it reads as an empty input
    done = subprocess.run(toolrun_mcp_argv("--tools-dir", str(folder)), cwd=ROOT, env=server_env(),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def handshake(version: str = "2025-11-25") -> list[dict[str, Any]]:
    """What a client sends first: ``initialize`` (id 1) and ``notifications/initialized``."""
    return [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "file", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"}]


def tool_call(request_id: int, name: str, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def served_from_a_file(folder: Path, messages: list[dict[str, Any]], tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    """``toolrun mcp --tools-dir FOLDER < requests.jsonl``: stdin a regular file, read by a thread, its end seen at once."""
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps(message) + "\n" for message in messages), encoding="utf-8")
    with requests.open("rb") as stdin:
        return subprocess.run(toolrun_mcp_argv("--tools-dir", str(folder)), cwd=ROOT, env=server_env(), stdin=stdin,
                              capture_output=True, timeout=60)


def test_requests_running_when_stdin_closes_are_answered_connection_closed(folder: Path, tmp_path: Path) -> None:
    done = served_from_a_file(folder, [*handshake("2025-06-18"), tool_call(2, "sleep_long")], tmp_path)
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert replies[0]["result"]["protocolVersion"] == "2025-06-18"
    assert replies[1] == {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "Connection closed"}}


def test_requests_read_with_the_end_of_stdin_are_answered_and_a_nan_result_is_strict_json(tmp_path: Path) -> None:
    # `toolrun mcp < requests.jsonl`: quick requests read with the end still get their answers; a call
    # cancelled in the same read (by its id written as a string) gets none, not even "Connection closed".
    (tmp_path / "tools").mkdir()
    folder = tools_dir(tmp_path / "tools")
    (folder / "stats.py").write_text("def stats():\n    return {'mean': float('nan'), 'max': float('inf')}\n",
                                     encoding="utf-8")
    (folder / "stats.yaml").write_text(textwrap.dedent("""
        name: stats
        description: >-
          Returns the mean and the maximum of the last readings as a JSON object. Use it to check the
          readings; do not use it for anything else, it changes nothing anywhere at all, not a file.
        parameters: {type: object, properties: {}}
        backend: {python: "stats.py:stats"}
        """), encoding="utf-8")
    done = served_from_a_file(folder, [
        *handshake(),
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        tool_call(3, "echo", text="hi"),
        tool_call(4, "stats"),
        tool_call(5, "sleep_long"),
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "5"}},
    ], tmp_path)
    def strict(line: bytes) -> Any:  # what a JavaScript client parses: NaN and Infinity are not JSON
        return json.loads(line, parse_constant=lambda name: pytest.fail(f"{name} on the wire: {line!r}"))

    replies = {reply["id"]: reply for reply in map(strict, done.stdout.splitlines())}
    assert sorted(replies) == [1, 2, 3, 4]  # 5 was cancelled: no reply
    assert replies[2]["result"] == {}
    assert replies[3]["result"]["structuredContent"] == {"text": "hi", "length": 2}
    assert replies[4]["result"]["structuredContent"] == {"mean": None, "max": None}


def test_a_client_handed_to_the_sdk_gets_its_requests_read_with_the_end_of_stdin_answered_too(tmp_path: Path) -> None:
    # A ping before initialize hands the client to the SDK's server, whose dispatcher cancelled every request
    # still running at the end of stdin ("Connection closed" for all of a piped file's calls). Now it waits as
    # the lean server does: what ends within the grace is answered, a call that never ends is cut after it.
    (tmp_path / "tools").mkdir()
    folder = tools_dir(tmp_path / "tools")
    (folder / "nap.yaml").write_text(textwrap.dedent("""
        name: nap
        description: >-
          Sleeps for a fraction of a second and then says it woke. Use it only to test calls that take
          a moment; do not use it for anything else, it changes nothing anywhere at all, not a file.
        parameters: {type: object, properties: {}, additionalProperties: false}
        backend: {shell: {shell: true, command: "sleep 0.3; echo woke"}}
        """), encoding="utf-8")
    done = served_from_a_file(folder, [
        {"jsonrpc": "2.0", "id": 0, "method": "ping"},
        *handshake(),
        tool_call(2, "echo", text="hi"),
        tool_call(3, "nap"),
        {"jsonrpc": "2.0", "id": 4, "method": "tools/list"},
        tool_call(5, "sleep_long"),
        tool_call(6, "nap"),
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "6"}},
    ], tmp_path)
    replies = {reply["id"]: reply for reply in map(json.loads, done.stdout.splitlines())}
    assert sorted(replies) == [0, 1, 2, 3, 4, 5], done.stderr  # 6 was cancelled: no reply
    assert replies[2]["result"]["structuredContent"] == {"text": "hi", "length": 2}
    assert replies[3]["result"]["content"] == [{"type": "text", "text": "woke"}]
    assert "nap" in [tool["name"] for tool in replies[4]["result"]["tools"]]
    assert replies[5] == {"jsonrpc": "2.0", "id": 5, "error": {"code": -32000, "message": "Connection closed"}}
    assert done.returncode == 0 and b"Traceback" not in done.stderr


@pytest.mark.parametrize(("opening", "text"), [
    ([], "caf\udce9"),  # the lean server: the surrogate travels as its \u escape, which JSON reads back
    ([{"jsonrpc": "2.0", "id": 0, "method": "ping"}], "caf\ufffd"),  # handed to the SDK: its JSON cannot hold one
], ids=["lean", "sdk"])
def test_a_result_holding_a_byte_that_is_not_utf8_is_answered_and_the_server_goes_on(
        tmp_path: Path, opening: list[dict[str, Any]], text: str) -> None:
    # a python tool returning a latin-1 file name as os.listdir gives it: the SDK path ended the whole server
    folder = tmp_path / "tools"
    folder.mkdir()
    (folder / "odd.py").write_text('def odd() -> str:\n    return "caf" + b"\\xe9".decode("utf-8", "surrogateescape")\n',
                                   encoding="utf-8")
    (folder / "odd.yaml").write_text(textwrap.dedent("""
        name: odd_name
        description: >-
          Returns a file name that is not UTF-8. Use it only to test odd bytes in results; do not use it
          for anything else, it changes nothing anywhere at all, not a file, not a setting, not a service.
        parameters: {type: object, properties: {}, additionalProperties: false}
        backend: {python: "odd.py:odd"}
        """), encoding="utf-8")
    done = served_from_a_file(folder, [*opening, *handshake(), tool_call(2, "odd_name"),
                                       {"jsonrpc": "2.0", "id": 3, "method": "ping"}], tmp_path)
    assert done.returncode == 0, done.stderr
    replies = {reply["id"]: reply for reply in map(json.loads, done.stdout.splitlines())}
    assert replies[2]["result"]["content"] == [{"type": "text", "text": text}]
    assert replies[3]["result"] == {}


def test_an_approval_question_nobody_answers_is_withdrawn_and_the_call_denied_after_the_wait(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # In process, for a wait of 0.3 s instead of 10 minutes: the session reads lines fed to it and writes to a pipe
    import asyncio
    import io
    import os

    from toolrun.mcp import mapping
    from toolrun.mcp.audit import AuditLog
    from toolrun.mcp.catalog_service import CatalogService
    from toolrun.mcp.jsonrpc_lines import read_line
    from toolrun.mcp.lean_stdio import StdioSession
    from toolrun.mcp.live_catalog import LiveCatalog
    from toolrun.mcp.stdio_wire import LineWriter

    monkeypatch.setattr(mapping, "APPROVAL_WAIT_SECONDS", 0.3)
    folder = tools_dir(tmp_path)
    service = CatalogService(LiveCatalog(folder), audit=AuditLog(io.StringIO()))
    service.load()
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "t", "version": "1"}}}
    call = {"jsonrpc": "2.0", "id": "w1", "method": "tools/call",
            "params": {"name": "guarded_echo", "arguments": {"text": "no"}}}

    async def main() -> list[dict[str, Any]]:
        out, into = os.pipe()
        writer = await LineWriter(into).open()
        replies = asyncio.StreamReader()
        await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(replies),
                                                           os.fdopen(out, "rb"))
        requests = asyncio.StreamReader()
        opening, _ = read_line(json.dumps(hello))
        assert opening is not None
        serving = asyncio.create_task(StdioSession(service, writer).serve(opening, requests))
        requests.feed_data(json.dumps(call).encode() + b"\n")
        heard = [json.loads(await asyncio.wait_for(replies.readline(), 10)) for _ in range(4)]
        requests.feed_eof()
        await serving
        writer.close()
        os.close(into)
        return heard

    hello_reply, question, withdrawn, result = asyncio.run(main())
    assert hello_reply["id"] == 0 and question["method"] == "elicitation/create"
    assert withdrawn == {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {
        "requestId": question["id"], "reason": "nobody answered it in time"}}
    assert result["id"] == "w1" and result["result"]["isError"]
    assert result["result"]["content"][0]["text"] == \
        "approval failed: nobody answered the approval question within 0.005 minutes"  # no Python class name


def test_an_audit_log_that_cannot_be_written_refuses_calls_rather_than_run_them_unaudited(folder: Path) -> None:
    # a full disk (/dev/full answers every write so): the server ended the call with an internal error and a
    # traceback after its tool had run, and said "internal error ... a bug in toolrun" at exit
    client = RawClient(*toolrun_mcp_argv("--tools-dir", str(folder), "--audit", "/dev/full"))
    client.initialize()
    ran = client.request(1, "tools/call", {"name": "echo", "arguments": {"text": "hi"}})
    assert ran["result"]["structuredContent"] == {"text": "hi", "length": 2}  # it ran: its result is the client's
    refused = client.request(2, "tools/call", {"name": "echo", "arguments": {"text": "again"}})
    assert refused["result"]["isError"]
    assert refused["result"]["content"][0]["text"].startswith(
        "refused: the server's audit log cannot be written (No space left on device)")
    stderr = client.close()
    assert client.process.returncode == 0, stderr
    assert stderr.count("error: cannot write the audit log /dev/full (No space left on device)") == 1, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr


def test_an_audit_log_that_can_be_written_again_lets_calls_run_again(capsys: pytest.CaptureFixture[str]) -> None:
    # a real pipe nobody reads: full, it refuses the next line, as a full disk does; read, it takes lines again
    import fcntl
    import os

    from toolrun.mcp.audit import AuditLog

    out, into = os.pipe()
    fcntl.fcntl(into, fcntl.F_SETFL, fcntl.fcntl(into, fcntl.F_GETFL) | os.O_NONBLOCK)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(into, b"x" * 65536)
    log = AuditLog(open(into, "a", encoding="utf-8", buffering=1), owned=True, name="the pipe")
    log.record(client="ops", tool="restart_service", arguments={}, is_error=False, duration_ms=1)
    assert log.unwritable is not None
    with contextlib.suppress(BlockingIOError):
        fcntl.fcntl(out, fcntl.F_SETFL, fcntl.fcntl(out, fcntl.F_GETFL) | os.O_NONBLOCK)
        while os.read(out, 1 << 20):
            pass
    log.record(client="ops", tool="get_status", arguments={}, is_error=False, duration_ms=1)
    assert log.unwritable is None
    written = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(out, 1 << 20):
            written += chunk
    assert written.rstrip(b"\n").rsplit(b"\n", 1)[-1].endswith(b'"tool": "get_status", "arguments": {}, '
                                                                b'"is_error": false, "duration_ms": 1}')
    log.close()
    os.close(out)
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith("error: cannot write the audit log the pipe (") and "calls are refused" in said[0]
    assert said[1] == "toolrun: the audit log the pipe is written again; calls run again"


def test_a_lone_surrogate_in_a_clients_arguments_is_audited_and_refuses_no_later_call(tmp_path: Path) -> None:
    # "\ud800" is valid JSON, and UTF-8 cannot hold it: its line failed to encode, the call it audits ran
    # unaudited, and the server refused the next call of any client as if its disk were full
    folder = tools_dir(tmp_path)
    audit = tmp_path / "audit.jsonl"
    client = RawClient(*toolrun_mcp_argv("--tools-dir", str(folder), "--audit", str(audit)))
    client.initialize()
    client.send('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", '
                '"params": {"name": "echo", "arguments": {"text": "a\\ud800b"}}}')
    assert not client.receive()["result"]["isError"]
    client.send('{"jsonrpc": "2.0", "id": 2, "method": "tools/call", '
                '"params": {"name": "\\udc00", "arguments": {}}}')
    assert client.receive()["error"]["message"].startswith("Unknown tool")
    after = client.request(3, "tools/call", {"name": "echo", "arguments": {"text": "next"}})
    assert after["result"]["structuredContent"] == {"text": "next", "length": 4}
    stderr = client.close()
    assert "audit log" not in stderr, stderr
    lines = [json.loads(line) for line in audit.read_text(encoding="utf-8").splitlines()]
    assert [(line["tool"], line["arguments"]) for line in lines] == [
        ("echo", {"text": "a\ud800b"}), ("\udc00", {}), ("echo", {"text": "next"})]


FULL_DISK_SCRIPT = """
import json, resource, signal, sys
from pathlib import Path
from toolrun.mcp.audit import AuditLog

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails with EFBIG, as a full disk's with ENOSPC
path = Path(sys.argv[1])
log = AuditLog.open(path)
log.record(client="ops", tool="before", arguments={}, is_error=False, duration_ms=1)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + 100, hard))
for n in range(3):  # refused calls' lines, larger than a stream's buffer
    log.record(client="ops", tool="refused", arguments={"text": "x" * 5000}, is_error=True, duration_ms=0)
assert log.unwritable
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space again
log.record(client="ops", tool="after", arguments={}, is_error=False, duration_ms=1)
assert log.unwritable is None
log.close()
"""


def test_the_line_written_after_a_full_disk_is_a_line_of_its_own(tmp_path: Path) -> None:
    # the buffered stream kept what the full disk refused and sent it glued to the next line: the line of the
    # first call run again was inside one line no JSON reader reads
    path = tmp_path / "audit.jsonl"
    done = subprocess.run([sys.executable, "-c", FULL_DISK_SCRIPT, str(path)], cwd=ROOT, env=server_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0])["tool"] == "before" and json.loads(lines[-1])["tool"] == "after"
    assert len(lines) == 3  # the one line the disk cut short stays between them, on its own
