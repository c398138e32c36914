"""``toolrun mcp`` under load, driven by the official MCP client: calls/s, memory over many calls, concurrency.

Starts ``toolrun mcp --tools-dir tools.d`` (stdio, and ``--http 127.0.0.1:0`` with an access list
and an audit file) and calls ``get_flower_inventory`` (a python tool) through the SDK's client:
  stdio   one client, calls one after another
  http    one client, calls one after another
  burst   10 clients sending 200 calls at once (20 each); every answer is checked
  soak    --calls calls from 10 clients, 10 in flight each; the server's resident memory
          (VmRSS) is sampled as the calls go, and its peak (VmHWM) printed at the end

    python benchmarks/mcp_server.py [--calls 10000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.mcp_helpers

from tests.mcp_helpers import ROOT, TEAM_TOKENS, http_server, server_env, team_auth_file, toolrun_mcp_argv  # noqa: E402

CITIES = ["北京", "上海", "深圳"]
EXPECTED = {"北京": "玫瑰: 100, 郁金香: 150", "上海": "百合: 80, 康乃馨: 120", "深圳": "向日葵: 200, 玉兰: 90"}


def memory_kib(pid: int) -> dict[str, int]:
    """VmRSS (now) and VmHWM (peak) of a process, in KiB, from /proc."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0])
    return found


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (a loaded machine stretches wall time, not this)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def http_client(url: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {TEAM_TOKENS['admin']}"}
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers, timeout=60)), mode="legacy")


async def call(client: Any, index: int) -> None:
    city = CITIES[index % 3]
    result = await client.call_tool("get_flower_inventory", {"city": city})
    if result.is_error or result.content[0].text != EXPECTED[city]:
        raise AssertionError(f"call {index}: wrong answer {result}")


async def sequential(client: Any, count: int) -> float:
    started = time.perf_counter()
    for index in range(count):
        await call(client, index)
    return time.perf_counter() - started


async def fan_out(clients: list[Any], per_client: int, in_flight: int, on_progress: Any = None) -> float:
    """``per_client`` calls on each client, ``in_flight`` at a time on each."""
    done = 0

    async def worker(client: Any, offset: int) -> None:
        nonlocal done
        limit = anyio.Semaphore(in_flight)

        async def one(index: int) -> None:
            nonlocal done
            async with limit:
                await call(client, index)
                done += 1
                if on_progress is not None:
                    on_progress(done)

        async with anyio.create_task_group() as calls:
            for index in range(per_client):
                calls.start_soon(one, offset + index)

    started = time.perf_counter()
    async with anyio.create_task_group() as clients_group:
        for number, client in enumerate(clients):
            clients_group.start_soon(worker, client, number * per_client)
    return time.perf_counter() - started


async def stdio_bench(count: int) -> None:
    from mcp import Client, StdioServerParameters

    argv = toolrun_mcp_argv("--tools-dir", str(ROOT / "tools.d"))
    server = StdioServerParameters(command=argv[0], args=argv[1:], env=server_env(), cwd=str(ROOT))
    async with Client(server, mode="legacy") as client:
        await sequential(client, 20)  # warm up: imports, the tool's module
        started_cpu = time.process_time()
        seconds = await sequential(client, count)
        client_cpu = time.process_time() - started_cpu
    print(f"stdio   {count:>6} sequential calls: {seconds:6.2f} s  {count / seconds:7,.0f} calls/s  "
          f"{seconds * 1000 / count:6.2f} ms/call (client CPU {client_cpu * 1000 / count:.2f} ms/call)")


async def http_bench(url: str, pid: int, calls: int) -> None:
    from contextlib import AsyncExitStack

    async with AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(http_client(url)) for _ in range(10)]
        await sequential(clients[0], 20)
        count = 500
        cpu = cpu_seconds(pid)
        seconds = await sequential(clients[0], count)
        print(f"http    {count:>6} sequential calls: {seconds:6.2f} s  {count / seconds:7,.0f} calls/s  "
              f"{seconds * 1000 / count:6.2f} ms/call; server CPU {(cpu_seconds(pid) - cpu) * 1000 / count:.2f} ms/call")

        cpu = cpu_seconds(pid)
        seconds = await fan_out(clients, 20, 20)
        print(f"burst   {200:>6} concurrent calls from 10 clients (20 each at once), all correct: {seconds:6.2f} s  "
              f"{200 / seconds:7,.0f} calls/s; server CPU {(cpu_seconds(pid) - cpu) * 1000 / 200:.2f} ms/call")

        samples: list[tuple[int, int]] = []
        step = max(calls // 10, 1)

        def sample(done: int) -> None:
            if done % step == 0:
                samples.append((done, memory_kib(pid)["VmRSS"]))

        before = memory_kib(pid)["VmRSS"]
        cpu = cpu_seconds(pid)
        seconds = await fan_out(clients, calls // 10, 10, sample)
        peak = memory_kib(pid)
        print(f"soak    {calls:>6} calls from 10 clients (10 in flight each): {seconds:6.2f} s  {calls / seconds:7,.0f} calls/s; "
              f"server CPU {(cpu_seconds(pid) - cpu) * 1000 / calls:.2f} ms/call")
        print(f"        server RSS before {before / 1024:6.1f} MiB; after each {step:,} calls: "
              + ", ".join(f"{rss / 1024:.1f}" for _, rss in samples) + " MiB")
        print(f"        server RSS at the end {peak['VmRSS'] / 1024:6.1f} MiB, peak (VmHWM) {peak['VmHWM'] / 1024:6.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10_000, help="calls of the soak phase (default 10000)")
    options = parser.parse_args()
    anyio.run(stdio_bench, 1000)
    with tempfile.TemporaryDirectory() as folder:
        auth = team_auth_file(Path(folder))
        env = {"ONCALL_TOKEN": TEAM_TOKENS["oncall-bot"], "UPSTREAM_TOKEN": TEAM_TOKENS["upstream"]}
        with http_server("--tools-dir", str(ROOT / "tools.d"), "--auth", str(auth),
                         "--audit", str(Path(folder) / "audit.jsonl"), env=env) as server:
            anyio.run(http_bench, server.url, server.process.pid, options.calls)
            lines = (Path(folder) / "audit.jsonl").read_text(encoding="utf-8").count("\n")
            print(f"        audit log: {lines:,} lines (one per call)")


if __name__ == "__main__":
    main()
