"""What execute_call costs over doing the same work directly, per backend.

For each backend, the same work is timed two ways on one event loop:
  python  direct: the function itself            vs execute_call (validation, worker thread, cap, redact)
  shell   direct: asyncio subprocess of the argv  vs execute_call (render, clean env, process group)
  http    direct: one httpx request (new client)  vs execute_call (render, host checks, result) on loopback
Prints the best of 3 medians per call and the ratio execute_call / direct.

    .venv/bin/python benchmarks/call_overhead.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.loopback

from tests.loopback import LoopbackServer, Reply  # noqa: E402
from toolrun.backends.base import CallContext  # noqa: E402
from toolrun.core.tool import BackendSpec, SourceLocation, Tool  # noqa: E402
from toolrun.loop.execution import execute_call  # noqa: E402

TOOLS_D = Path(__file__).resolve().parent.parent / "tools.d"
CITY = {"type": "object", "properties": {"city": {"type": "string", "enum": ["北京", "上海", "深圳"]}},
        "required": ["city"]}


def tool(kind: str, config: dict, folder: Path) -> Tool:
    return Tool(name=f"bench_{kind}", description="benchmark", parameters=CITY, backend=BackendSpec(kind, config),
                source=SourceLocation(folder / "bench.yaml", 1))


ROUNDS = 3  # the best of a few medians: the machine is shared, noise only ever adds time


async def median_seconds(work: Callable[[], Awaitable[object]], repeat: int) -> float:
    await work()  # warm up: imports, caches, first connection
    medians = []
    for _ in range(ROUNDS):
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            await work()
            times.append(time.perf_counter() - started)
        medians.append(statistics.median(times))
    return min(medians)


async def measure(repeat: int) -> list[tuple[str, float, float]]:
    sys.path.insert(0, str(TOOLS_D))
    from flowers import get_flower_inventory  # the example tool's own function

    arguments = {"city": "北京"}
    context = CallContext()
    rows = []

    async def python_direct() -> object:
        return get_flower_inventory(**arguments)

    python_tool = tool("python", {"function": "flowers.py:get_flower_inventory"}, TOOLS_D)
    rows.append(("python", await median_seconds(python_direct, repeat),
                 await median_seconds(lambda: execute_call(python_tool, arguments, context), repeat)))

    argv = ["printf", "%s", "北京"]

    async def shell_direct() -> object:
        process = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE)
        out, _ = await process.communicate()
        return out

    with tempfile.TemporaryDirectory() as folder:
        shell_tool = tool("shell", {"argv": ["printf", "%s", "{{ city }}"]}, Path(folder))
        shell_repeat = max(10, repeat // 4)
        rows.append(("shell", await median_seconds(shell_direct, shell_repeat),
                     await median_seconds(lambda: execute_call(shell_tool, arguments, context), shell_repeat)))

    server = LoopbackServer(lambda request: Reply(200, {"city": "北京", "stock": 100})).start()
    try:
        url = server.url + "/stock/%E5%8C%97%E4%BA%AC"
        ssl_context = httpx.create_ssl_context()

        async def http_direct() -> object:
            async with httpx.AsyncClient(verify=ssl_context) as client:
                return (await client.get(url)).text

        http_tool = tool("http", {"method": "GET", "url": server.url + "/stock/{city}"}, TOOLS_D)
        rows.append(("http", await median_seconds(http_direct, repeat),
                     await median_seconds(lambda: execute_call(http_tool, arguments, context), repeat)))
    finally:
        server.stop()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    options = parser.parse_args()
    rows = asyncio.run(measure(options.repeat))
    print(f"{'backend':8} {'direct':>12} {'execute_call':>14} {'overhead':>12} {'ratio':>8}")
    for kind, direct, wrapped in rows:
        print(f"{kind:8} {direct * 1e6:10.1f}µs {wrapped * 1e6:12.1f}µs {(wrapped - direct) * 1e6:10.1f}µs "
              f"{wrapped / direct:7.1f}x")


if __name__ == "__main__":
    main()
