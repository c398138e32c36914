"""The server's Prometheus metrics, served on their own address (``--metrics-listen``).

Metrics carry tool names, which say what a team's APIs can do: they are never mounted on
the public ``/mcp`` address. Each server has its own registry (not the library's global
one), so two servers in one process, as in the tests, never mix their counts. A tool name
a client made up is counted as ``(unknown)``: a client cannot grow the label set.

    toolrun_mcp_calls_total{tool, outcome}          outcome: ok | error | unknown_tool
    toolrun_mcp_call_duration_seconds{tool}         histogram of served calls
    toolrun_mcp_calls_in_flight                     calls running now
    toolrun_mcp_open_sessions                       HTTP sessions open now
    toolrun_mcp_auth_failures_total{reason}         requests refused before the protocol
    toolrun_mcp_catalog_reloads_total               reloads after a tool file changed
    toolrun_mcp_catalog_load_problems               problems of the last load (their tools not served)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

UNKNOWN_TOOL_LABEL = "(unknown)"
# Seconds: a local python tool answers in milliseconds, an HTTP API in tenths, a shell tool in seconds.
CALL_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class GatewayMetrics:
    """Counters, gauges and a histogram of one server, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.calls = Counter("toolrun_mcp_calls", "Tool calls served, by tool and outcome.", ["tool", "outcome"],
                             registry=self.registry)
        self.call_seconds = Histogram("toolrun_mcp_call_duration_seconds", "Time to serve a tool call.", ["tool"],
                                      buckets=CALL_SECONDS_BUCKETS, registry=self.registry)
        self.calls_in_flight = Gauge("toolrun_mcp_calls_in_flight", "Tool calls running now.", registry=self.registry)
        self.open_sessions = Gauge("toolrun_mcp_open_sessions", "HTTP sessions open now.", registry=self.registry)
        self.auth_failures = Counter("toolrun_mcp_auth_failures", "Requests refused before the protocol, by reason.",
                                     ["reason"], registry=self.registry)
        self.catalog_reloads = Counter("toolrun_mcp_catalog_reloads", "Catalog reloads after a tool file changed.",
                                       registry=self.registry)
        self.catalog_problems = Gauge("toolrun_mcp_catalog_load_problems",
                                      "Problems of the last catalog load (their tools are not served).",
                                      registry=self.registry)

    def call_finished(self, tool: str | None, outcome: str, seconds: float) -> None:
        """One served call: ``tool`` None when the client named a tool it cannot see (nothing ran)."""
        label = tool if tool is not None else UNKNOWN_TOOL_LABEL
        self.calls.labels(tool=label, outcome=outcome).inc()
        if tool is not None:
            self.call_seconds.labels(tool=label).observe(seconds)

    def auth_failed(self, reason: str) -> None:
        self.auth_failures.labels(reason=reason).inc()

    def catalog_loaded(self, problems: int, *, reload: bool) -> None:
        if reload:
            self.catalog_reloads.inc()
        self.catalog_problems.set(problems)

    def count_sessions(self, open_now: Callable[[], int]) -> None:
        """The open-sessions gauge reads ``open_now`` at each scrape."""
        self.open_sessions.set_function(lambda: float(open_now()))


@dataclass
class MetricsEndpoint:
    """A running ``/metrics`` server: its URL, and how to stop it."""

    url: str
    stop: Callable[[], None]


def serve_metrics(metrics: GatewayMetrics, host: str, port: int) -> MetricsEndpoint:
    """Serve ``/metrics`` (any path, as prometheus-client does) on ``host:port`` in a thread; OSError when taken."""
    server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    bound_port = server.server_address[1]
    shown_host = f"[{host}]" if ":" in host else host

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(5)

    return MetricsEndpoint(f"http://{shown_host}:{bound_port}/metrics", stop)


