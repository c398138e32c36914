"""Calls through haproxy (``deploy/haproxy.cfg``) to one ``toolrun mcp --http`` replica, and to three.

Each round starts the replicas and the balancer (tests/integration/gateway_cluster.py), opens
``--clients`` MCP sessions through it (the official SDK's client, all in this process) and
has each make ``--calls`` calls of ``work`` (a python tool waiting ``--ms`` milliseconds)
one after another. Printed per replica count: calls per second over the whole run (the
sessions' opening included), the p50 and p99 of one call's latency, and how the sessions
spread over the replicas. The clients share this process's CPU with the replicas and
haproxy: on a 2-core machine three replicas fight one another and the clients for the same
two cores, so the figure to read is that failover costs little, not a speed-up.

    python benchmarks/gateway.py [--clients 50] [--calls 20] [--ms 0] [--replicas 1,3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.integration.gateway_cluster

from tests.integration.gateway_cluster import gateway_cluster  # noqa: E402
from tests.integration.test_gateway_replicas import mcp_client  # noqa: E402


async def load(url: str, clients: int, calls: int, ms: int) -> tuple[float, list[float], Counter[int]]:
    """(wall seconds, each call's latency, sessions per replica pid)."""
    latencies: list[float] = []
    sessions: Counter[int] = Counter()

    async def one_client() -> None:
        async with mcp_client(url) as client:
            for number in range(calls):
                started = time.perf_counter()
                result = await client.call_tool("work", {"ms": ms})
                latencies.append(time.perf_counter() - started)
                assert not result.is_error, result.content
                if number == 0:
                    sessions[(result.structured_content or {})["pid"]] += 1

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(clients):
            group.start_soon(one_client)
    return time.perf_counter() - started, latencies, sessions


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--ms", type=int, default=0)
    parser.add_argument("--replicas", default="1,3")
    options = parser.parse_args()
    print(f"{options.clients} sessions x {options.calls} calls of a {options.ms} ms tool, through haproxy")
    print(f"{'replicas':>8}  {'calls/s':>8}  {'p50 ms':>7}  {'p99 ms':>7}  {'mean ms':>7}  sessions per replica")
    for count in (int(text) for text in options.replicas.split(",")):
        with tempfile.TemporaryDirectory() as folder, gateway_cluster(Path(folder), count) as cluster:
            wall, latencies, sessions = anyio.run(load, cluster.url, options.clients, options.calls, options.ms)
        spread = "/".join(str(sessions[pid]) for pid in cluster.pids())
        print(f"{count:>8}  {len(latencies) / wall:>8.0f}  {percentile(latencies, 0.5) * 1000:>7.1f}  "
              f"{percentile(latencies, 0.99) * 1000:>7.1f}  {statistics.fmean(latencies) * 1000:>7.1f}  {spread}")


if __name__ == "__main__":
    main()
