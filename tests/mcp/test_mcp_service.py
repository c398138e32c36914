"""``toolrun mcp --http`` as a service: health and readiness, Prometheus metrics, the SIGTERM drain, stateless mode.

The server runs in this process (uvicorn on a real loopback socket, the official MCP client
over real HTTP): the SDK is already imported, so a server costs milliseconds, not a process
start. The drain test sends SIGTERM to this process, as an orchestrator would to a replica:
uvicorn's handlers (installed on the main thread while the server runs) take it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import socket
import textwrap
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from prometheus_client.parser import text_string_to_metric_families

from toolrun.core.errors import UserError
from toolrun.mcp import serve
from toolrun.mcp.access import AccessList, load_access_list
from toolrun.mcp.drain import DrainingServer
from toolrun.mcp.health import HealthRoutes, Readiness
from toolrun.mcp.http import bind, http_server_for
from toolrun.mcp.live_catalog import LiveCatalog
from toolrun.mcp.metrics import serve_metrics
from toolrun.mcp.server import CatalogServer
from toolrun.mcp.service import ServiceOptions, parse_metrics_address

TOKEN = "svc-token-5e1f0a77"
DESCRIPTION = ("Use it to check the server as a service; do not use it for anything else, "
               "it changes nothing anywhere and returns only what it was given.")


def write_tools(parent: Path) -> Path:
    """A tools folder under ``parent``: ``echo``, ``slow`` (async) and ``wipe`` (needs approval)."""
    folder = parent / "tools"
    folder.mkdir(exist_ok=True)
    (folder / "service.py").write_text(textwrap.dedent("""
        import asyncio

        def echo(text):
            return {"text": text}

        async def slow(seconds):
            await asyncio.sleep(seconds)
            return {"slept": seconds}
    """), encoding="utf-8")
    for name, function, parameter, extra in (("echo", "echo", "text: {type: string, description: Text to echo.}", ""),
                                             ("slow", "slow", "seconds: {type: number, description: Seconds to wait.}",
                                              "timeout: 20s\n"),
                                             ("wipe", "echo", "text: {type: string, description: Text to echo.}",
                                              "confirm: true\n")):
        key = parameter.split(":")[0]
        (folder / f"{name}.yaml").write_text(
            f"name: {name}\ndescription: >-\n  Answers with what it was given, as JSON. {DESCRIPTION}\n"
            f"parameters:\n  type: object\n  properties:\n    {parameter}\n  required: [{key}]\n"
            f"  additionalProperties: false\n{extra}backend:\n  python: service.py:{function}\n", encoding="utf-8")
    return folder


def access_list(folder: Path) -> AccessList:
    path = folder / "clients.yaml"
    path.write_text(f"clients:\n  - name: svc\n    token_sha256: {hashlib.sha256(TOKEN.encode()).hexdigest()}\n",
                    encoding="utf-8")
    return load_access_list(path)


def client(url: str, token: str | None = TOKEN) -> Client:
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=30)), mode="legacy")


@asynccontextmanager
async def running(server: CatalogServer, access: AccessList | None = None,
                  service: ServiceOptions | None = None) -> AsyncIterator[tuple[str, DrainingServer]]:
    """The server on a free loopback port, in this event loop; stopped at exit unless a drain stopped it."""
    sock = bind("127.0.0.1", 0)
    http_server = http_server_for(server, sock, access, service=service)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(http_server.serve, [sock])
        with anyio.fail_after(10):
            while not http_server.started:
                await anyio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", http_server
        http_server.should_exit = True


def catalog_server(folder: Path, **options: Any) -> CatalogServer:
    server = CatalogServer(LiveCatalog(folder), **options)
    server.load()
    return server


# ---------------------------------------------------------------- health and readiness


def test_healthz_and_readyz_answer_before_anything_else_and_readyz_follows_loading_and_draining() -> None:
    async def teapot(scope: Any, receive: Any, send: Any) -> None:  # what the gate and /mcp stand for here
        await send({"type": "http.response.start", "status": 418, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    readiness = Readiness()
    app = HealthRoutes(teapot, readiness)

    async def check() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gateway") as http:
            async def statuses() -> tuple[int, int, str]:
                ready = await http.get("/readyz")
                return (await http.get("/healthz")).status_code, ready.status_code, ready.json()["status"]

            assert await statuses() == (200, 503, "loading")
            readiness.loaded = True
            assert await statuses() == (200, 200, "ready")
            assert (await http.head("/readyz")).status_code == 200
            readiness.draining = True
            assert await statuses() == (200, 503, "draining")
            assert (await http.post("/readyz")).status_code == 405
            assert (await http.get("/mcp")).status_code == 418
            assert (await http.get("/healthz/x")).status_code == 418

    anyio.run(check)


# ---------------------------------------------------------------- metrics


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``/metrics`` as parsed by prometheus-client: (name, sorted labels) -> value."""
    text = httpx.get(url, timeout=10).text
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def test_metrics_parsed_by_prometheus_client_count_the_calls_made_the_refusals_and_the_reloads(tmp_path: Path) -> None:
    tools = write_tools(tmp_path)
    server = catalog_server(tools)
    endpoint = serve_metrics(server.metrics, "127.0.0.1", 0)
    samples: list[dict[tuple[str, tuple[tuple[str, str], ...]], float]] = []

    async def check() -> None:
        async with running(server, access_list(tmp_path)) as (url, _):
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            accept = {"Accept": "application/json, text/event-stream"}
            async with httpx.AsyncClient(timeout=10) as http:
                await http.post(f"{url}/mcp", json=body, headers=accept)
                await http.post(f"{url}/mcp", json=body, headers={**accept, "Authorization": "Bearer wrong"})
                await http.post(f"{url}/mcp", json=body, headers={**accept, "Origin": "https://evil.example"})
            async with client(f"{url}/mcp") as mcp:
                for text in ("a", "b", "c"):
                    assert not (await mcp.call_tool("echo", {"text": text})).is_error
                assert (await mcp.call_tool("echo", {"text": 7})).is_error
                with pytest.raises(Exception, match="Unknown tool"):
                    await mcp.call_tool("made_up_by_the_client", {})
                samples.append(await anyio.to_thread.run_sync(scrape, endpoint.url))
            (tools / "broken.yaml").write_text("name: broken\n  - not yaml", encoding="utf-8")
            assert await server.refresh()
            samples.append(await anyio.to_thread.run_sync(scrape, endpoint.url))

    try:
        anyio.run(check)
    finally:
        endpoint.stop()
    during, after = samples
    assert during[("toolrun_mcp_calls_total", (("outcome", "ok"), ("tool", "echo")))] == 3
    assert during[("toolrun_mcp_calls_total", (("outcome", "error"), ("tool", "echo")))] == 1
    assert during[("toolrun_mcp_calls_total", (("outcome", "unknown_tool"), ("tool", "(unknown)")))] == 1
    assert during[("toolrun_mcp_call_duration_seconds_count", (("tool", "echo"),))] == 4
    assert during[("toolrun_mcp_call_duration_seconds_bucket", (("le", "+Inf"), ("tool", "echo")))] == 4
    assert not any(name.startswith("toolrun_mcp_call_duration") and ("tool", "(unknown)") in labels
                   for name, labels in during)
    for reason in ("no_token", "unknown_token", "origin"):
        assert during[("toolrun_mcp_auth_failures_total", (("reason", reason),))] == 1
    assert during[("toolrun_mcp_open_sessions", ())] == 1
    assert during[("toolrun_mcp_calls_in_flight", ())] == 0
    assert (during[("toolrun_mcp_catalog_reloads_total", ())], during[("toolrun_mcp_catalog_load_problems", ())]) == (0, 0)
    problems = len(server.live.snapshot.problems)
    assert problems and (after[("toolrun_mcp_catalog_reloads_total", ())],
                         after[("toolrun_mcp_catalog_load_problems", ())]) == (1, problems)
    assert after[("toolrun_mcp_open_sessions", ())] == 0  # the client said goodbye


def test_metrics_listen_is_checked_and_never_the_public_address(tmp_path: Path) -> None:
    assert parse_metrics_address("9464", ("0.0.0.0", 8080)) == ("127.0.0.1", 9464)
    assert parse_metrics_address("10.0.0.5:9464", ("0.0.0.0", 8080)) == ("10.0.0.5", 9464)
    assert parse_metrics_address("[::1]:9464", ("::1", 8080)) == ("::1", 9464)
    for text, message in (("0.0.0.0:9464", "every interface"), ("[::]:9464", "every interface"),
                          ("127.0.0.1:8080", "is the --http address"), ("metrics", "is not"), ("1:99999", "is not")):
        with pytest.raises(UserError, match=message):
            parse_metrics_address(text, ("127.0.0.1", 8080))
    with pytest.raises(UserError, match="--metrics-listen is for a server over HTTP"):
        serve(write_tools(tmp_path), metrics_listen="9464")
    with pytest.raises(UserError, match="--stateless is for a server over HTTP"):
        serve(tmp_path, stateless=True)


def test_metrics_listen_refuses_every_interface_however_the_address_is_written() -> None:
    # "0:9464" passed the check, and the socket layer reads "0" as 0.0.0.0: /metrics answered on every interface
    for text in ("0:9464", "0.0:9464", "0x0:9464", "000.000.000.000:9464", "[0:0::0]:9464", "[::ffff:0.0.0.0]:9464"):
        host = text.rpartition(":")[0]
        if not host.startswith("["):  # IPv4's forms: what a socket bound there listens on (a host may lack IPv6)
            with socket.socket(socket.AF_INET) as sock:
                sock.bind((host, 0))
                assert sock.getsockname()[0] == "0.0.0.0", text
        with pytest.raises(UserError, match="listens on every interface"):
            parse_metrics_address(text, ("10.0.0.5", 8080))
    assert parse_metrics_address("10.0.0.0:9464", ("10.0.0.5", 8080)) == ("10.0.0.0", 9464)  # a network's first address


# ---------------------------------------------------------------- the drain


def test_sigterm_turns_readyz_503_waits_the_delay_lets_a_long_call_finish_and_closes_event_streams(tmp_path: Path) -> None:
    said: list[str] = []
    server = catalog_server(write_tools(tmp_path), report=said.append)
    seen: dict[str, Any] = {}

    async def check() -> None:
        async with running(server, service=ServiceOptions(drain_delay=1.5)) as (url, http_server):
            async with client(f"{url}/mcp") as mcp:  # a 2025-11-25 client: it holds a GET event stream open
                async def long_call() -> None:
                    # Longer than uvicorn's own 2 s graceful shutdown, which used to cut such calls.
                    seen["result"] = await mcp.call_tool("slow", {"seconds": 2.6})

                async with anyio.create_task_group() as calls:
                    calls.start_soon(long_call)
                    await anyio.sleep(0.3)
                    os.kill(os.getpid(), signal.SIGTERM)
                    await anyio.sleep(0.1)
                    async with httpx.AsyncClient(timeout=5) as http:  # as a balancer checks, during the delay
                        seen["during"] = ((await http.get(f"{url}/healthz")).status_code,
                                          (await http.get(f"{url}/readyz")).status_code)
                        seen["mcp_during_delay"] = (await mcp.call_tool("echo", {"text": "still served"})).is_error
                with anyio.fail_after(15):  # the server stops by itself: the long call was the last thing it had
                    while not http_server.drained:
                        await anyio.sleep(0.05)
            seen["exited"] = http_server.should_exit

    anyio.run(check)
    assert seen["during"] == (200, 503)
    assert seen["mcp_during_delay"] is False
    result = seen["result"]
    assert not result.is_error and result.structured_content == {"slept": 2.6}
    assert seen["exited"] and server.calls_in_flight == 0
    assert [line for line in said if "drain" in line] == [  # the operator is told, not left guessing
        "toolrun: draining: /readyz answers 503; new connections are taken for 1.5 s more, "
        "then calls under way (1 now) have up to 30 s to finish",  # the longest tool timeout: the default 30 s
        "toolrun: drained; stopping"]


# ---------------------------------------------------------------- stateless


def test_stateless_keeps_no_session_and_refuses_tools_that_need_approval_unless_yes(tmp_path: Path) -> None:
    folder = write_tools(tmp_path)
    answers: dict[str, Any] = {}

    async def check(assume_yes: bool) -> None:
        server = catalog_server(folder, stateless=True, assume_yes=assume_yes)
        async with running(server, service=ServiceOptions(stateless=True)) as (url, _):
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                "clientInfo": {"name": "t", "version": "1"}}}
            async with httpx.AsyncClient(timeout=10) as http:
                opened = await http.post(f"{url}/mcp", json=initialize,
                                         headers={"Accept": "application/json, text/event-stream"})
            answers[f"session-{assume_yes}"] = opened.headers.get("mcp-session-id")
            async with client(f"{url}/mcp", token=None) as mcp:  # it even says it can answer elicitation
                answers[f"echo-{assume_yes}"] = await mcp.call_tool("echo", {"text": "hi"})
                answers[f"wipe-{assume_yes}"] = await mcp.call_tool("wipe", {"text": "all"})

    anyio.run(check, False)
    anyio.run(check, True)
    assert answers["session-False"] is None and answers["session-True"] is None
    assert not answers["echo-False"].is_error
    refused = answers["wipe-False"]
    assert refused.is_error and "--stateless" in refused.content[0].text and "--yes" in refused.content[0].text
    assert not answers["wipe-True"].is_error


@pytest.mark.integration  # a whole process start: seconds, and the in-process drain test above covers the rest
def test_a_sigterm_sent_on_seeing_the_url_drains_and_the_process_exits_0(tmp_path: Path) -> None:
    """The URL is printed once uvicorn's signal handlers are in place: a process manager that stops the
    server as soon as it is up gets a drain and status 0, not a death by SIGTERM."""
    from tests.mcp_helpers import http_server

    with http_server("--tools-dir", str(write_tools(tmp_path)), "--drain-delay", "100ms") as started:
        started.process.send_signal(signal.SIGTERM)
        assert started.process.wait(30) == 0, "\n".join(started.stderr)


def echoed(url: str, text: str) -> bool:
    """Whether a call of ``echo`` with ``text`` on the server at ``url`` (no token) ran, in a session of its own."""
    async def call() -> bool:
        async with client(url, token=None) as mcp:
            return not (await mcp.call_tool("echo", {"text": text})).is_error

    return anyio.run(call)


def reopened(started: Any) -> None:
    """SIGHUP to a server, once it has said it reopened its audit log (its stderr so far in ``started.stderr``)."""
    said = sum("reopened the audit log" in line for line in started.stderr)
    started.process.send_signal(signal.SIGHUP)
    _wait_for(lambda: sum("reopened the audit log" in line for line in started.stderr) > said, "no reopen",
              started.stderr)


@pytest.mark.integration  # a whole process start, as the SIGTERM one above
def test_sighup_reopens_the_audit_log_where_logrotate_moved_it_away_and_the_server_goes_on(tmp_path: Path) -> None:
    # SIGHUP ended the server at once (exit 129, no drain); logrotate's postrotate sends it so that the lines go
    # to a new file at the log's path, not on into the renamed one
    from tests.mcp_helpers import http_server

    audit = tmp_path / "audit.jsonl"
    with http_server("--tools-dir", str(write_tools(tmp_path)), "--audit", str(audit)) as started:
        assert echoed(started.url, "before")
        audit.rename(tmp_path / "audit.jsonl.1")
        reopened(started)
        assert echoed(started.url, "after")
        assert started.process.poll() is None, "\n".join(started.stderr)
    rotated = [json.loads(line)["arguments"] for line in (tmp_path / "audit.jsonl.1").read_text().splitlines()]
    current = [json.loads(line)["arguments"] for line in audit.read_text().splitlines()]
    assert (rotated, current) == ([{"text": "before"}], [{"text": "after"}])
    assert f"toolrun: reopened the audit log {audit}" in "\n".join(started.stderr)


@pytest.mark.integration  # a whole process start, as the SIGHUP one above
def test_a_sighup_while_the_server_starts_is_kept_and_reopens_the_audit_log_once_it_serves(tmp_path: Path) -> None:
    # The log opens before the SDK is imported and the catalog loaded (a second or more); a SIGHUP then ended
    # the server (exit 129), before the event loop's handler was in place.
    import subprocess
    import threading

    from tests.mcp_helpers import server_env, stop_process, toolrun_mcp_argv

    audit = tmp_path / "audit.jsonl"
    process = subprocess.Popen(toolrun_mcp_argv("--http", "127.0.0.1:0", "--drain-delay", "0s", "--audit", str(audit),
                                                "--tools-dir", str(write_tools(tmp_path))),
                               env=server_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True, encoding="utf-8")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in process.stderr or ()), daemon=True)
    reader.start()
    try:
        _wait_for(audit.exists, "no audit log", lines)
        assert not any(line.startswith("listening on ") for line in lines), "started before the signal: nothing tested"
        audit.rename(tmp_path / "audit.jsonl.1")
        process.send_signal(signal.SIGHUP)
        _wait_for(lambda: any(line.startswith("listening on ") for line in lines) or process.poll() is not None,
                  "no URL", lines, timeout=60)
        assert process.poll() is None, f"exit {process.returncode}:\n" + "\n".join(lines)
        _wait_for(lambda: any("reopened the audit log" in line for line in lines), "no reopen", lines)
        url = next(line for line in lines if line.startswith("listening on ")).split("listening on ", 1)[1]
        assert echoed(url, "after")
    finally:
        stop_process(process)
        reader.join(5)
    assert [json.loads(line)["arguments"] for line in audit.read_text().splitlines()] == [{"text": "after"}]
    assert (tmp_path / "audit.jsonl.1").read_text() == ""


def _wait_for(condition: Any, what: str, lines: list[str], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}:\n" + "\n".join(lines)
        time.sleep(0.01)


@pytest.mark.integration  # a whole process start, as the SIGHUP one above
@pytest.mark.skipif(not hasattr(os, "getuid") or not hasattr(__import__("resource"), "prlimit"), reason="Linux")
def test_a_sighup_reopening_the_same_file_after_a_line_was_cut_short_starts_the_next_line_on_its_own(
        tmp_path: Path) -> None:
    # A file size limit (RLIMIT_FSIZE, what a full disk does too) cuts a line short; once it is lifted, a SIGHUP
    # that opens the same file again (nothing rotated it) must not glue the next line onto the cut one
    import resource

    from tests.mcp_helpers import http_server

    audit = tmp_path / "audit.jsonl"

    with http_server("--tools-dir", str(write_tools(tmp_path)), "--audit", str(audit)) as started:
        pid = started.process.pid
        assert echoed(started.url, "before")
        limits = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (audit.stat().st_size + 30, limits[1]))  # 30 bytes of the next
        echoed(started.url, "cut")
        _wait_for(lambda: any("cannot write the audit log" in line for line in started.stderr), "no write error",
                  started.stderr)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, limits)  # space again
        reopened(started)
        echoed(started.url, "refused")  # the log was unwritable: refused, its line tries the file
        assert echoed(started.url, "after")
    lines = audit.read_text().splitlines()
    assert len(lines[1]) == 30, lines  # the line cut short, alone
    assert [json.loads(line)["arguments"] for line in lines[:1] + lines[2:]] == [
        {"text": "before"}, {"text": "refused"}, {"text": "after"}]


@pytest.mark.integration  # a whole process start, as the SIGHUP one above
@pytest.mark.skipif(not hasattr(os, "getuid") or not hasattr(__import__("resource"), "prlimit"), reason="Linux")
def test_calls_refused_over_an_unwritable_audit_log_run_again_after_logrotate_and_a_sighup(tmp_path: Path) -> None:
    import resource

    from tests.mcp_helpers import http_server

    audit = tmp_path / "audit.jsonl"

    with http_server("--tools-dir", str(write_tools(tmp_path)), "--audit", str(audit)) as started:
        pid = started.process.pid
        for text in ("one", "two", "three"):
            assert echoed(started.url, text)
        limits = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (audit.stat().st_size, limits[1]))  # full: a file this large
        echoed(started.url, "unwritten")
        assert not echoed(started.url, "refused")  # fail closed
        audit.rename(tmp_path / "audit.jsonl.1")  # logrotate
        reopened(started)
        first = echoed(started.url, "first after")
        second = echoed(started.url, "second after")
    # Fail closed: the first call is refused, its line the first the new file takes; from then on calls run
    assert (first, second) == (False, True), "\n".join(started.stderr)
    assert "is written again; calls run again" in "\n".join(started.stderr)
    assert [json.loads(line)["arguments"] for line in audit.read_text().splitlines()] == [
        {"text": "first after"}, {"text": "second after"}]


@pytest.mark.integration  # a whole process start, and a call of seconds
def test_a_second_sigterm_during_the_drain_says_the_calls_under_way_are_cut_not_that_the_server_drained(
        tmp_path: Path) -> None:
    import threading

    from tests.mcp_helpers import http_server

    calling_at = threading.Event()

    async def slow(url: str) -> None:
        with contextlib.suppress(Exception):  # the second SIGTERM cuts it: what the client sees is not the point
            async with client(url, token=None) as mcp:
                calling_at.set()
                await mcp.call_tool("slow", {"seconds": 15})

    with http_server("--tools-dir", str(write_tools(tmp_path)), "--drain-delay", "1s") as started:
        calling = threading.Thread(target=anyio.run, args=(slow, started.url), daemon=True)
        calling.start()
        assert calling_at.wait(10)
        time.sleep(0.5)  # the call's request on its way
        started.process.send_signal(signal.SIGTERM)
        _wait_for(lambda: any("(1 now)" in line for line in started.stderr), "no drain", started.stderr)
        time.sleep(1.5)  # past the delay: the drain waits for the call
        started.process.send_signal(signal.SIGTERM)
        started.process.wait(30)
        calling.join(30)
    said = "\n".join(started.stderr)
    assert "drained; stopping" not in said, said
    assert "toolrun: the drain was cut short by a second signal: stopping now, 1 call still running cut short" in said


def test_the_drain_waits_as_long_as_the_longest_timeout_of_the_tools_served_now_not_at_start(tmp_path: Path) -> None:
    # A tool added to the folder while the server runs is served: its calls get their own timeout at the drain too
    said: list[str] = []
    folder = write_tools(tmp_path)
    server = catalog_server(folder, report=said.append)

    async def check() -> None:
        async with running(server, service=ServiceOptions(drain_delay=0)) as (_url, http_server):
            text = (folder / "slow.yaml").read_text(encoding="utf-8")
            (folder / "slower.yaml").write_text(text.replace("name: slow", "name: slower")
                                                .replace("timeout: 20s", "timeout: 45s"), encoding="utf-8")
            assert await server.refresh() and server.live.get("slower") is not None
            http_server.begin_drain()
            with anyio.fail_after(10):
                while not http_server.drained:
                    await anyio.sleep(0.05)

    anyio.run(check)
    assert any("have up to 45 s to finish" in line for line in said), said
