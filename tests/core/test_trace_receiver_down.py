"""Traces to a receiver that cannot take them: the run is unharmed, stderr gets one line of toolrun's, and the
process exits within the export timeout (2 s), not the OpenTelemetry exporter's 10 s and retry schedule.

The receivers are real loopback sockets: a port bound but not listening (connection refused), a listener
that never answers, an HTTP server answering 401 (and then 200, for a server that sees sending recover).
The commands are real processes.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from mcp import Client
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.cli.test_cli_recipe import INVENTORY, ROOT, clean_env
from tests.loopback import LoopbackServer, Reply
from tests.mcp_helpers import http_server
from toolrun.core.otel_tracing import EXPORT_TIMEOUT, ReportedExporter

SECRET = "tok-SECRET-OTLP"
LIBRARY_WORDS = ("Traceback", "opentelemetry", "Transient error", "Failed to export", "retrying", "HTTPConnection")


@pytest.fixture
def refusing_port() -> Iterator[int]:
    """A loopback port that refuses connections: bound (no one else takes it) but not listening."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def unauthorized_port(loopback: Any) -> int:
    """A receiver that answers every batch 401, with a body a terminal would obey."""
    server = loopback(lambda request: Reply(status=401, body="\x1b[31mno token\x1b[0m"))
    return int(server.url.rsplit(":", 1)[1])


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A loopback port that takes connections and requests and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)  # the kernel completes the handshakes; nobody accepts or reads
        yield sock.getsockname()[1]


def run_recipe(**env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "toolrun", "recipe", str(INVENTORY), "--no-log"], cwd=ROOT,
                          env=clean_env(**env), capture_output=True, text=True, timeout=120)
    return done, time.monotonic() - started


@pytest.fixture(scope="module")
def delivered() -> Iterator[tuple[subprocess.CompletedProcess[str], float]]:
    """The traced run whose receiver takes its spans, and how long it took."""
    receiver = LoopbackServer(lambda request: Reply(headers={"Content-Type": "application/x-protobuf"})).start()
    try:
        done, seconds = run_recipe(OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
        assert done.returncode == 0 and receiver.requests, done.stderr  # the spans of a run leave at exit
        yield done, seconds
    finally:
        receiver.stop()


@pytest.mark.parametrize(("receiver", "reason"), [
    ("refusing_port", "connection refused"),
    ("silent_port", f"no answer within {EXPORT_TIMEOUT:g} s (a slower receiver needs OTEL_EXPORTER_OTLP_TIMEOUT, in seconds)"),
    ("unauthorized_port", "the receiver answered HTTP 401"),
])
def test_an_unreachable_receiver_is_one_line_and_a_short_wait_at_exit(
        receiver: str, reason: str, request: pytest.FixtureRequest,
        delivered: tuple[subprocess.CompletedProcess[str], float]) -> None:
    traced, traced_seconds = delivered
    port = request.getfixturevalue(receiver)
    done, seconds = run_recipe(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://trace-user:{SECRET}@127.0.0.1:{port}",
                               OTEL_EXPORTER_OTLP_HEADERS=f"authorization=Bearer {SECRET}")
    assert done.returncode == 0, done.stderr
    assert done.stdout == traced.stdout  # the answer is unharmed
    lines = done.stderr.splitlines()
    assert lines[-1] == f"traces could not be sent to http://127.0.0.1:{port}/v1/traces: {reason}"
    assert len(lines) == len(traced.stderr.splitlines()) + 1
    assert not [word for word in LIBRARY_WORDS if word in done.stderr] and SECRET not in done.stderr
    assert seconds - traced_seconds < EXPORT_TIMEOUT + 1.5, f"{seconds:.1f} s against {traced_seconds:.1f} s delivered"


def test_an_explicit_otlp_timeout_is_the_one_waited_for(silent_port: int) -> None:
    done, _ = run_recipe(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{silent_port}", OTEL_EXPORTER_OTLP_TIMEOUT="0.5")
    assert done.returncode == 0
    assert done.stderr.splitlines()[-1].endswith("/v1/traces: no answer within 0.5 s (a slower receiver needs "
                                                 "OTEL_EXPORTER_OTLP_TIMEOUT, in seconds)")


def test_at_exit_a_receiver_that_failed_is_not_waited_for_again(loopback: Any,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    receiver = loopback(lambda request: Reply(status=401))
    endpoint = receiver.url + "/v1/traces"
    exporter = ReportedExporter(OTLPSpanExporter(endpoint=endpoint, timeout=EXPORT_TIMEOUT), endpoint, EXPORT_TIMEOUT)
    with caplog.at_level(logging.WARNING):
        assert exporter.export([]) is SpanExportResult.FAILURE
        assert exporter.export([]) is SpanExportResult.FAILURE  # still tried while the process runs
        exporter.exiting = True
        assert exporter.export([]) is SpanExportResult.FAILURE
    assert len(receiver.requests) == 2
    assert [record.getMessage() for record in caplog.records] == [
        f"traces could not be sent to {endpoint}: the receiver answered HTTP 401"]


def wait_for(condition: Callable[[], object], what: str, lines: list[str], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"no {what}:\n" + "\n".join(lines)
        time.sleep(0.05)


@pytest.mark.integration  # a whole toolrun mcp --http server, started and stopped: 4 s
def test_a_server_says_once_that_traces_fail_and_once_that_they_reach_the_receiver_again(loopback: Any) -> None:
    taking = threading.Event()  # until set, the receiver refuses every batch (a revoked token)
    receiver = loopback(lambda request: Reply(status=200 if taking.is_set() else 401,
                                              headers={"Content-Type": "application/x-protobuf"}))
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_BSP_SCHEDULE_DELAY": "50"}
    with http_server("--tools-dir", str(ROOT / "tools.d"), "--tools", "get_flower_*", env=env) as server:

        def trace_lines() -> list[str]:
            return [line for line in server.stderr if "traces" in line]

        async def calls(count: int) -> None:
            async with Client(server.url) as client:
                for _ in range(count):
                    answer = await client.call_tool("get_flower_inventory", {"city": "北京"})
                    assert not answer.is_error  # tracing never harms a call
                    await anyio.sleep(0.2)  # each call's spans in a batch of their own

        anyio.run(calls, 3)
        wait_for(lambda: len(receiver.requests) >= 3, "three refused batches", server.stderr)
        taking.set()
        anyio.run(calls, 1)
        wait_for(lambda: len(trace_lines()) == 2, "line about the recovery", server.stderr)
        started = time.monotonic()
    stopped_in = time.monotonic() - started
    failed, recovered = trace_lines()
    assert failed.endswith(f"traces could not be sent to {receiver.url}/v1/traces: the receiver answered HTTP 401")
    assert recovered.endswith(f"traces reach {receiver.url}/v1/traces again")
    assert not [line for line in server.stderr if any(word in line for word in LIBRARY_WORDS[2:])]
    assert stopped_in < EXPORT_TIMEOUT + 3


def test_another_exporter_of_the_process_still_logs_its_failures(refusing_port: int,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    # A program that embeds toolrun and exports its own traces: its exporter's records are its own to handle.
    endpoint = f"http://127.0.0.1:{refusing_port}/v1/traces"
    with caplog.at_level(logging.WARNING):
        assert OTLPSpanExporter(endpoint=endpoint, timeout=0.5).export([]) is SpanExportResult.FAILURE
    assert any("Failed to export" in record.getMessage() for record in caplog.records), caplog.records
